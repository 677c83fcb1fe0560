//! Container log files capped and rotated as the kubelet does (`containerLogMaxSize`,
//! `containerLogMaxFiles`): the current file is `<container>.log`; when writing would take
//! it past the size cap it becomes `<container>.log.1` (older files shift to `.2`, ...)
//! and at most `max_files` files exist, the current one included. `kubectl logs` reads
//! the current file, as from a kubelet.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Default size cap of one container log file: 10 MiB (the kubelet's default).
pub const DEFAULT_MAX_SIZE: u64 = 10 * 1024 * 1024;
/// Default number of log files per container, the current one included (kubelet: 5).
pub const DEFAULT_MAX_FILES: usize = 5;

/// A size-capped, rotating log file.
pub struct RotatingLog {
    path: PathBuf,
    max_size: u64,
    max_files: usize,
    file: File,
    size: u64,
}

fn rotated(path: &Path, n: usize) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

impl RotatingLog {
    /// Creates (truncates) the log at `path`, removing rotated files of an earlier run.
    /// `max_size` is at least 1 byte and `max_files` at least 2 (as the kubelet requires).
    pub fn create(path: &Path, max_size: u64, max_files: usize) -> std::io::Result<Self> {
        let max_files = max_files.max(2);
        for n in 1..=max_files.max(16) {
            let _ = std::fs::remove_file(rotated(path, n));
        }
        Ok(RotatingLog {
            path: path.to_path_buf(),
            max_size: max_size.max(1),
            max_files,
            file: File::create(path)?,
            size: 0,
        })
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        let _ = std::fs::remove_file(rotated(&self.path, self.max_files - 1));
        for n in (1..self.max_files - 1).rev() {
            let from = rotated(&self.path, n);
            if from.exists() {
                std::fs::rename(&from, rotated(&self.path, n + 1))?;
            }
        }
        std::fs::rename(&self.path, rotated(&self.path, 1))?;
        self.file = File::create(&self.path)?;
        self.size = 0;
        Ok(())
    }

    /// Appends `data`, rotating first when the current file would exceed the cap (a chunk
    /// larger than the cap is split).
    pub fn write_all(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            if self.size >= self.max_size {
                self.rotate()?;
            }
            let room = (self.max_size - self.size) as usize;
            let n = room.min(data.len());
            self.file.write_all(&data[..n])?;
            self.size += n as u64;
            data = &data[n..];
        }
        Ok(())
    }

    /// Copies `input` into the log until end of file (blocking).
    pub fn copy_from(&mut self, mut input: impl Read) -> std::io::Result<()> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) => return self.file.flush(),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.write_all(&buf[..n])?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_and_keeps_at_most_max_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.log");
        let mut log = RotatingLog::create(&p, 10, 3).unwrap();
        for i in 0..10u8 {
            log.write_all(&[b'a' + i; 7]).unwrap();
        }
        drop(log);
        let cur = std::fs::read(&p).unwrap();
        assert!(cur.len() <= 10);
        assert!(cur.ends_with(&[b'j'; 7][..]), "{cur:?}");
        assert!(rotated(&p, 1).exists() && rotated(&p, 2).exists());
        assert!(!rotated(&p, 3).exists());
        let total: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(total <= 30, "{total}");
    }
}
