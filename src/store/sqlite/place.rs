//! Where the file may be: in a folder that exists, not a folder itself, and
//! on a filesystem of this machine. SQLite's locks are the filesystem's: on
//! a network filesystem they are not kept between machines (and not always
//! on one), so two holders could run at once; the store refuses to start
//! there, naming the filesystem.

use std::path::Path;

/// Why `path` cannot be the store's file, if it cannot.
pub(super) fn unfit(path: &Path) -> Option<String> {
    if path.is_dir() {
        return Some("this is a folder, not a file".to_owned());
    }
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return Some(format!("the folder {} does not exist", folder.display()));
    }
    let network = network_filesystem(folder)?;
    Some(format!(
        "the folder is on a network filesystem ({network}), where SQLite's locks do not hold between machines: use a server store"
    ))
}

/// The network filesystem `folder` is on, by the name it goes by.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn network_filesystem(folder: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(folder.as_os_str().as_bytes()).ok()?;
    // SAFETY: all-zero bytes are a valid `statfs` (integers and arrays only).
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated and `stat` writable for the call.
    if unsafe { libc::statfs(name.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    // The type's width and sign differ between targets; its 32 bits are the magic.
    #[allow(clippy::unnecessary_cast)]
    let magic = (stat.f_type as u64) & 0xffff_ffff;
    network_by_magic(magic)
}

/// Linux's filesystem magic numbers (`statfs(2)`) of the network filesystems.
#[cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]
fn network_by_magic(magic: u64) -> Option<&'static str> {
    Some(match magic {
        0x6969 => "NFS",
        0x517b => "SMB",
        0xff53_4d42 => "CIFS",
        0xfe53_4d42 => "SMB2",
        0x5346_414f => "AFS",
        0x0000_564c => "NCP",
        0x7375_7245 => "Coda",
        0x00c3_6400 => "Ceph",
        0x0bd0_0bd0 => "Lustre",
        0x0116_1970 => "GFS2",
        0x7461_636f => "OCFS2",
        _ => return None,
    })
}

#[cfg(target_os = "macos")]
fn network_filesystem(folder: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(folder.as_os_str().as_bytes()).ok()?;
    // SAFETY: all-zero bytes are a valid `statfs` (integers and arrays only).
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated and `stat` writable for the call.
    if unsafe { libc::statfs(name.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let kind: Vec<u8> = stat
        .f_fstypename
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    match kind.as_slice() {
        b"nfs" => Some("NFS"),
        b"smbfs" => Some("SMB"),
        b"afpfs" => Some("AFP"),
        b"webdav" => Some("WebDAV"),
        _ => None,
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos")))]
fn network_filesystem(_folder: &Path) -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_folder_is_fit_and_network_filesystems_are_known_by_their_magic() {
        let folder = std::env::temp_dir();
        assert_eq!(unfit(&folder.join("locks.db")), None);
        assert_eq!(network_by_magic(0x6969), Some("NFS"));
        assert_eq!(network_by_magic(0xff53_4d42), Some("CIFS"));
        // ext4, tmpfs, overlayfs, btrfs, xfs: this machine's own.
        for local in [0xef53, 0x0102_1994, 0x794c_7630, 0x9123_683e, 0x5846_5342] {
            assert_eq!(network_by_magic(local), None, "{local:#x}");
        }
    }
}
