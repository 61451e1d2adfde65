//! The sweep of old rows: one part per table, each in two steps.

use super::hashes::hex;

/// Rows deleted per sweep statement.
const SWEEP_BATCH: i64 = 500;

/// One table's part of a sweep, in two steps: a read of the rows to go,
/// which takes no lock, then a delete of those rows by their keys, which
/// checks again that each should go. (One `DELETE ... LIMIT` would scan the
/// table and wait for every row another session holds, expired or not, a
/// row lock of another application's transaction included.)
pub struct Sweep {
    /// Finds up to a batch of rows to go: their key columns.
    pub select: String,
    table: String,
    columns: &'static [&'static str],
    condition: String,
}

impl Sweep {
    pub(super) fn new(table: &str, columns: &'static [&'static str], condition: String) -> Sweep {
        Sweep {
            select: format!(
                "SELECT {} FROM {table} WHERE {condition} LIMIT {SWEEP_BATCH}",
                columns.join(", ")
            ),
            table: table.to_owned(),
            columns,
            condition,
        }
    }

    /// The delete of the rows `select` found (their key columns), if any.
    pub fn delete(&self, rows: &[Vec<Option<Vec<u8>>>]) -> Option<String> {
        let found: Vec<String> = rows
            .iter()
            .filter_map(|row| {
                let values = row
                    .iter()
                    .map(|value| value.as_deref().map(|bytes| format!("X'{}'", hex(bytes))))
                    .collect::<Option<Vec<_>>>()?;
                (values.len() == self.columns.len()).then(|| format!("({})", values.join(", ")))
            })
            .collect();
        if found.is_empty() {
            return None;
        }
        Some(format!(
            "DELETE FROM {} WHERE ({}) IN ({}) AND {}",
            self.table,
            self.columns.join(", "),
            found.join(", "),
            self.condition
        ))
    }
}
