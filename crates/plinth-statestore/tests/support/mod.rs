//! Test servers for the state store writers: bare repositories, `git daemon`, an OpenSSH
//! server with `git-shell`, and moto's S3 server. Every server binds 127.0.0.1 on a port
//! chosen free at run time and is killed when its handle is dropped.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts TCP connections on the port (or panics after `timeout`).
pub fn wait_for_port(port: u16, timeout: Duration, what: &str) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{what} did not start listening on 127.0.0.1:{port} within {timeout:?}");
}

/// A global git config for the CLI in tests: only `safe.directory=*`.
fn test_gitconfig() -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "plinth-statestore-test-{}.gitconfig",
        std::process::id()
    ));
    if !p.exists() {
        std::fs::write(&p, "[safe]\n\tdirectory = *\n").unwrap();
    }
    p
}

/// Runs the `git` CLI with an isolated configuration; panics with its stderr on failure.
pub fn git(cwd: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "safe.directory=*", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        // Repositories served over SSH belong to the SSH user; allow reading them locally.
        .env("GIT_CONFIG_GLOBAL", test_gitconfig())
        .env("GIT_AUTHOR_NAME", "someone-else")
        .env("GIT_AUTHOR_EMAIL", "else@example.test")
        .env("GIT_COMMITTER_NAME", "someone-else")
        .env("GIT_COMMITTER_EMAIL", "else@example.test")
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("git CLI runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Clones `url` with the git CLI into a fresh directory under `parent` and returns it.
pub fn cli_clone(parent: &Path, url: &str, branch: &str) -> PathBuf {
    let dir = parent.join(format!("clone-{}", rand_suffix()));
    git(
        parent,
        &[
            "clone",
            "-q",
            "--branch",
            branch,
            url,
            dir.to_str().unwrap(),
        ],
    );
    dir
}

/// Number of commits on `branch` of the bare repository.
pub fn commit_count(bare: &Path, branch: &str) -> usize {
    git(bare, &["rev-list", "--count", branch])
        .trim()
        .parse()
        .unwrap()
}

/// Every file of a checkout (except `.git`), relative path → bytes.
pub fn tree_files(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.file_name().unwrap() == ".git" {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(root, root, &mut out);
    out
}

pub fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A child process killed (and reaped) on drop.
pub struct Server {
    pub port: u16,
    child: Child,
    pub name: &'static str,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `git daemon` serving every repository under `base` (receive-pack optional).
pub fn git_daemon(base: &Path, receive_pack: bool) -> Server {
    let port = free_port();
    let mut cmd = Command::new("git");
    cmd.args([
        "daemon",
        "--reuseaddr",
        "--export-all",
        "--listen=127.0.0.1",
    ])
    .arg(format!("--base-path={}", base.display()))
    .arg(format!("--port={port}"))
    .env("GIT_CONFIG_NOSYSTEM", "1")
    .env("GIT_CONFIG_GLOBAL", "/dev/null")
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if receive_pack {
        cmd.arg("--enable=receive-pack");
    }
    cmd.arg(base);
    let child = cmd.spawn().expect("git daemon starts");
    let s = Server {
        port,
        child,
        name: "git daemon",
    };
    wait_for_port(port, Duration::from_secs(10), "git daemon");
    s
}

/// Where test tools live (moto's venv), as installed by scripts/install-test-deps.sh.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("PLINTH_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools"))
}

/// moto's S3 server, or None (with a SKIPPED line) when it is not installed.
pub fn moto() -> Option<Server> {
    let bin = tools_dir().join("venv/bin/moto_server");
    if !bin.exists() {
        println!(
            "SKIPPED: {} not found; run scripts/install-test-deps.sh",
            bin.display()
        );
        return None;
    }
    let port = free_port();
    let child = Command::new(&bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto_server starts");
    let s = Server {
        port,
        child,
        name: "moto_server",
    };
    wait_for_port(port, Duration::from_secs(60), "moto_server");
    Some(s)
}

/// Sends one raw HTTP request and returns the status code (moto accepts unsigned requests).
pub fn http(port: u16, method: &str, path: &str) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Creates a bucket on moto.
pub fn create_bucket(port: u16, bucket: &str) {
    let code = http(port, "PUT", &format!("/{bucket}"));
    assert!(code == 200, "creating bucket {bucket}: HTTP {code}");
}

// ---------------------------------------------------------------------------------------------
// SSH git server

/// The user the SSH server lets in; its login shell is git-shell.
pub const SSH_USER: &str = "plinth-git";

fn find_program(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

/// An OpenSSH server whose only user has `git-shell` as its shell.
pub struct SshGitServer {
    pub server: Server,
    /// known_hosts line for this server.
    pub known_hosts: String,
    pub dir: PathBuf,
}

/// Makes sure the SSH git user exists (root only), as scripts/install-test-deps.sh does.
fn ensure_ssh_user(git_shell: &Path) -> Result<(), String> {
    let exists = || {
        Command::new("id")
            .arg(SSH_USER)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if exists() {
        return Ok(());
    }
    let st = Command::new("useradd")
        .args(["-r", "-M", "-d", "/nonexistent", "-s"])
        .arg(git_shell)
        .arg(SSH_USER)
        .status()
        .map_err(|e| format!("useradd: {e}"))?;
    // Another test process may have created it at the same moment.
    if !st.success() && !exists() {
        return Err("useradd failed (not root?)".into());
    }
    // useradd leaves the account locked ('!'), and sshd refuses locked accounts.
    let _ = Command::new("usermod").args(["-p", "*", SSH_USER]).status();
    Ok(())
}

/// Generates an ed25519 key with `ssh-keygen` (`passphrase` may be empty); returns
/// (private key text, public key line).
pub fn keygen(dir: &Path, name: &str, passphrase: &str) -> (String, String) {
    let path = dir.join(name);
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", passphrase, "-C", name, "-f"])
        .arg(&path)
        .status()
        .expect("ssh-keygen runs");
    assert!(st.success());
    (
        std::fs::read_to_string(&path).unwrap(),
        std::fs::read_to_string(path.with_extension("pub")).unwrap(),
    )
}

/// Starts sshd on a free port with `authorized` public keys for [`SSH_USER`]. Returns None
/// (after printing SKIPPED) when sshd or git-shell is not installed.
pub fn ssh_git_server(dir: &Path, authorized: &[String]) -> Option<SshGitServer> {
    let Some(sshd) = find_program(&["/usr/sbin/sshd", "/usr/local/sbin/sshd"]) else {
        println!("SKIPPED: sshd not installed; run scripts/install-test-deps.sh");
        return None;
    };
    let Some(git_shell) = find_program(&["/usr/local/bin/git-shell", "/usr/bin/git-shell"]) else {
        println!("SKIPPED: git-shell not found");
        return None;
    };
    if let Err(e) = ensure_ssh_user(&git_shell) {
        println!("SKIPPED: cannot create SSH user {SSH_USER}: {e}");
        return None;
    }
    let sdir = dir.join("sshd");
    std::fs::create_dir_all(&sdir).unwrap();
    let _ = std::fs::create_dir_all("/run/sshd");
    let host_key = sdir.join("hostkey");
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&host_key)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(sdir.join("authorized_keys"), authorized.join("\n")).unwrap();
    let port = free_port();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {hk}\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\nAllowUsers {SSH_USER}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\nPermitRootLogin no\nStrictModes no\nLogLevel VERBOSE\n",
        hk = host_key.display(),
        d = sdir.display()
    );
    std::fs::write(sdir.join("sshd_config"), config).unwrap();
    let child = Command::new(&sshd)
        .arg("-D")
        .arg("-f")
        .arg(sdir.join("sshd_config"))
        .arg("-E")
        .arg(sdir.join("sshd.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sshd starts");
    let server = Server {
        port,
        child,
        name: "sshd",
    };
    wait_for_port(port, Duration::from_secs(10), "sshd");
    let pubkey = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
    let mut parts = pubkey.split_whitespace();
    let known_hosts = format!(
        "[127.0.0.1]:{port} {} {}\n",
        parts.next().unwrap(),
        parts.next().unwrap()
    );
    Some(SshGitServer {
        server,
        known_hosts,
        dir: sdir,
    })
}

/// Gives a repository (and the directories above it up to `top`) to the SSH user.
pub fn hand_to_ssh_user(repo: &Path, top: &Path) {
    let st = Command::new("chown")
        .args(["-R", &format!("{SSH_USER}:")])
        .arg(repo)
        .status()
        .unwrap();
    assert!(st.success());
    let mut p = repo.parent();
    while let Some(d) = p {
        let _ = Command::new("chmod").arg("a+rx").arg(d).status();
        if d == top {
            break;
        }
        p = d.parent();
    }
}

// ---------------------------------------------------------------------------------------------
// HTTPS git server: git-http-backend behind lighttpd with TLS and basic auth

/// lighttpd serving `<dir>/repos/*` over HTTPS (self-signed certificate for 127.0.0.1) with
/// basic auth user `alice`, password `secret`.
pub struct HttpsGitServer {
    pub server: Server,
    pub repos: PathBuf,
    /// lighttpd's plain user file (`user:password` lines), re-read on every request.
    pub users: PathBuf,
    /// PEM of the self-signed certificate.
    pub cert: PathBuf,
}

impl HttpsGitServer {
    /// URL of a repository under `repos` (without credentials).
    pub fn url(&self, repo: &str) -> String {
        format!("https://127.0.0.1:{}/git/{repo}", self.server.port)
    }
}

/// Starts lighttpd; None (after printing SKIPPED) when lighttpd, mod_openssl, openssl or
/// git-http-backend is missing.
pub fn https_git_server(dir: &Path) -> Option<HttpsGitServer> {
    https_git_server_with_users(dir, "alice:secret\n")
}

/// Like [`https_git_server`], with the given lighttpd plain user file content.
pub fn https_git_server_with_users(dir: &Path, users: &str) -> Option<HttpsGitServer> {
    let Some(lighttpd) = find_program(&["/usr/sbin/lighttpd", "/usr/local/sbin/lighttpd"]) else {
        println!("SKIPPED: lighttpd not installed; run scripts/install-test-deps.sh");
        return None;
    };
    if !Path::new("/usr/lib/lighttpd/mod_openssl.so").exists() {
        println!("SKIPPED: lighttpd-mod-openssl not installed; run scripts/install-test-deps.sh");
        return None;
    }
    let exec_path = Command::new("git").arg("--exec-path").output().ok()?;
    let backend =
        PathBuf::from(String::from_utf8_lossy(&exec_path.stdout).trim()).join("git-http-backend");
    if !backend.exists() {
        println!("SKIPPED: git-http-backend not found");
        return None;
    }
    let d = dir.join("lighttpd");
    let repos = d.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    std::fs::create_dir_all(d.join("www")).unwrap();
    let (cert, key) = (d.join("cert.pem"), d.join("key.pem"));
    let st = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !st.map(|s| s.success()).unwrap_or(false) {
        println!("SKIPPED: openssl could not make a certificate");
        return None;
    }
    std::fs::write(d.join("users"), users).unwrap();
    let port = free_port();
    let conf = format!(
        r#"server.modules = ("mod_alias", "mod_setenv", "mod_auth", "mod_authn_file", "mod_openssl", "mod_cgi")
server.document-root = "{d}/www"
server.bind = "127.0.0.1"
server.port = {port}
server.errorlog = "{d}/error.log"
server.upload-dirs = ("{d}")
ssl.engine = "enable"
ssl.pemfile = "{cert}"
ssl.privkey = "{key}"
alias.url = ( "/git" => "{backend}" )
$HTTP["url"] =~ "^/git" {{
  cgi.assign = ("" => "")
  setenv.set-environment = ( "GIT_PROJECT_ROOT" => "{repos}", "GIT_HTTP_EXPORT_ALL" => "1", "HOME" => "{d}" )
  auth.backend = "plain"
  auth.backend.plain.userfile = "{d}/users"
  auth.require = ( "" => ( "method" => "basic", "realm" => "git", "require" => "valid-user" ) )
}}
"#,
        d = d.display(),
        cert = cert.display(),
        key = key.display(),
        backend = backend.display(),
        repos = repos.display(),
    );
    std::fs::write(d.join("lighttpd.conf"), conf).unwrap();
    let child = Command::new(lighttpd)
        .arg("-D")
        .arg("-f")
        .arg(d.join("lighttpd.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("lighttpd starts");
    let server = Server {
        port,
        child,
        name: "lighttpd",
    };
    wait_for_port(port, Duration::from_secs(10), "lighttpd");
    Some(HttpsGitServer {
        server,
        repos,
        users: d.join("users"),
        cert,
    })
}
