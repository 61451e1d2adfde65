//! What the server says back, read: a row's columns as text, and an error
//! it reported.

use postgres_protocol::message::backend::{DataRowBody, ErrorFields};

use super::super::answer::Answer;

/// What the server answered a statement with: the operations' answer
/// shape (what they read of it), or the error it reported.
pub type ServerAnswer = Result<Answer, DbError>;

/// An error the server reported: its severity, SQLSTATE and message.
#[derive(Debug, Clone)]
pub struct DbError {
    pub severity: String,
    pub code: String,
    pub message: String,
}

impl DbError {
    pub fn read(mut fields: ErrorFields<'_>) -> DbError {
        use fallible_iterator::FallibleIterator;
        let mut error = DbError {
            severity: "ERROR".to_owned(),
            code: String::new(),
            message: String::new(),
        };
        while let Ok(Some(field)) = fields.next() {
            let value = String::from_utf8_lossy(field.value_bytes()).into_owned();
            match field.type_() {
                b'V' => error.severity = value,
                b'C' => error.code = value,
                b'M' => error.message = value,
                _ => {}
            }
        }
        error
    }

    /// The session is ending (the server is shutting down, or killed it).
    pub fn ends_session(&self) -> bool {
        matches!(self.severity.as_str(), "FATAL" | "PANIC") || self.code.starts_with("57P")
    }
}

/// A row's columns as text (None: NULL).
pub fn row_values(row: &DataRowBody) -> Vec<Option<String>> {
    use fallible_iterator::FallibleIterator;
    let buffer = row.buffer();
    let mut values = Vec::new();
    let mut ranges = row.ranges();
    while let Ok(Some(range)) = ranges.next() {
        values.push(range.map(|r| String::from_utf8_lossy(&buffer[r]).into_owned()));
    }
    values
}
