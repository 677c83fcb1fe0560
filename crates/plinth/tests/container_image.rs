//! The repository's `Containerfile` builds a working `plinth` image (podman, no registry):
//! the base is a local image holding only the shared libraries the binary links — what the
//! default distroless base provides — and the context is laid out as the Containerfile
//! expects it after `cargo build --release`. Skipped, with a visible message, without
//! podman.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn podman(conf: &Path, args: &[&str]) -> Output {
    Command::new("podman")
        .env("CONTAINERS_CONF", conf)
        .args(args)
        .output()
        .expect("run podman")
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The files `ldd` names for `bin` (libraries and the dynamic loader).
fn shared_libraries(bin: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(bin).output().expect("run ldd");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, rhs)) => rhs.trim().split(' ').next()?,
                None => l.split(' ').next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// Copies `src` (following symlinks) to the same path under `root`.
fn copy_into(root: &Path, src: &Path) {
    let dest = root.join(src.strip_prefix("/").unwrap());
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(src, &dest).unwrap_or_else(|e| panic!("copying {}: {e}", src.display()));
}

/// Imports a rootfs holding `bin`'s shared libraries as a local base image.
fn import_base(conf: &Path, tmp: &Path, bin: &Path, tag: &str) {
    let rootfs = tmp.join("base-rootfs");
    for dir in ["tmp", "etc"] {
        std::fs::create_dir_all(rootfs.join(dir)).unwrap();
    }
    for lib in shared_libraries(bin) {
        copy_into(&rootfs, &lib);
    }
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run tar");
    let out = Command::new("podman")
        .env("CONTAINERS_CONF", conf)
        .args(["import", "-", tag])
        .stdin(tar.stdout.take().unwrap())
        .output()
        .expect("podman import");
    assert!(tar.wait().unwrap().success(), "tar of the base rootfs");
    ok(out, "podman import");
}

/// A build context as a release build leaves the repository: the Containerfile, its
/// .containerignore, the image overlay and `target/release/plinth`.
fn build_context(tmp: &Path, bin: &Path) -> PathBuf {
    let ctx = tmp.join("ctx");
    let root = repo_root();
    std::fs::create_dir_all(ctx.join("target/release")).unwrap();
    std::fs::copy(bin, ctx.join("target/release/plinth")).unwrap();
    for f in ["Containerfile", ".containerignore"] {
        std::fs::copy(root.join(f), ctx.join(f)).unwrap();
    }
    let overlay = ctx.join("scripts/image-root/bin");
    std::fs::create_dir_all(&overlay).unwrap();
    let link = std::fs::read_link(root.join("scripts/image-root/bin/pipeline-adapter"))
        .expect("scripts/image-root/bin/pipeline-adapter is a symlink");
    std::os::unix::fs::symlink(link, overlay.join("pipeline-adapter")).unwrap();
    // Something the .containerignore must keep out of the image.
    std::fs::write(ctx.join("target/release/not-in-image"), "x").unwrap();
    ctx
}

#[test]
fn containerfile_builds_an_image_that_runs_plinth_and_the_pipeline_adapter() {
    if plinth_runner::config::find_on_path("podman").is_none() {
        eprintln!(
            "SKIPPED: container image test: podman is not installed (scripts/install-test-deps.sh installs it)"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let conf = plinth_runner::backend::write_containers_conf(tmp.path()).unwrap();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_plinth"));
    let id = std::process::id();
    let base = format!("localhost/plinth-test-base:{id}");
    let image = format!("localhost/plinth-test-image:{id}");
    import_base(&conf, tmp.path(), &bin, &base);
    let ctx = build_context(tmp.path(), &bin);
    let build = podman(
        &conf,
        &[
            "build",
            "--pull=never",
            "--build-arg",
            &format!("BASE={base}"),
            "-t",
            &image,
            "-f",
            &ctx.join("Containerfile").to_string_lossy(),
            &ctx.to_string_lossy(),
        ],
    );
    let result = std::panic::catch_unwind(|| {
        ok(build, "podman build");
        let version = ok(
            podman(
                &conf,
                &["run", "--rm", "--network", "none", &image, "--version"],
            ),
            "plinth --version in the image",
        );
        assert_eq!(
            version.trim(),
            format!("plinth {}", env!("CARGO_PKG_VERSION"))
        );
        let adapter = ok(
            podman(
                &conf,
                &[
                    "run",
                    "--rm",
                    "--network",
                    "none",
                    "--entrypoint",
                    "/bin/pipeline-adapter",
                    &image,
                    "--help",
                ],
            ),
            "/bin/pipeline-adapter --help in the image",
        );
        assert!(adapter.contains("work-creator"), "{adapter}");
        let user = ok(
            podman(
                &conf,
                &["image", "inspect", "--format", "{{.Config.User}}", &image],
            ),
            "podman image inspect",
        );
        assert_eq!(user.trim(), "65532:65532");
        // Only the binary and the overlay came from the context.
        let name = format!("plinth-test-files-{id}");
        ok(
            podman(&conf, &["create", "--name", &name, &image]),
            "podman create",
        );
        let export = Command::new("sh")
            .env("CONTAINERS_CONF", &conf)
            .arg("-c")
            .arg(format!("podman export {name} | tar -tv"))
            .output()
            .expect("podman export");
        let _ = podman(&conf, &["rm", "-f", &name]);
        let files = ok(export, "podman export");
        assert!(files.contains("bin/pipeline-adapter -> plinth"), "{files}");
        assert!(files.lines().any(|l| l.ends_with(" bin/plinth")), "{files}");
        assert!(
            !files.contains("not-in-image") && !files.contains("target/"),
            "{files}"
        );
    });
    let _ = podman(&conf, &["rmi", "-f", &image, &base]);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
