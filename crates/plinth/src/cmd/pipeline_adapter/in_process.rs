//! Adapter roles that `plinth up`'s Job runner runs in its own process
//! ([`plinth_runner::inprocess`]): the command line, environment, files, identity and
//! output of the `plinth pipeline-adapter` process the container would have started.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser};
use futures::future::BoxFuture;
use plinth_runner::adapter::{AdapterCall, AdapterProgram};
use tracing::instrument::WithSubscriber;

use super::{AdapterRole, EnvLookup, Written, run_role};

/// The adapter program `plinth up` gives its Job runner.
#[derive(Debug, Default)]
pub struct InProcessAdapter;

impl AdapterProgram for InProcessAdapter {
    fn run(&self, call: AdapterCall) -> BoxFuture<'static, i32> {
        Box::pin(run(call))
    }
}

/// `plinth pipeline-adapter`'s command line, without the program name.
#[derive(Parser)]
#[command(name = "pipeline-adapter", no_binary_name = true)]
struct AdapterCli {
    #[command(subcommand)]
    role: AdapterRole,
}

/// Runs one adapter container: its exit code, its output and errors in its log (an
/// error as the process prints it, exit code 1; a bad command line as clap prints it,
/// exit code 2).
async fn run(mut call: AdapterCall) -> i32 {
    let env = |k: &str| call.var(k);
    let mut role = match parse_role(&call.args, &env) {
        Ok(role) => role,
        Err(e) => {
            let _ = write!(call.output, "{}", e.render());
            return e.exit_code();
        }
    };
    if let Some(refused) = refused_write(&role, &call) {
        let _ = writeln!(call.output, "{refused}");
        return 1;
    }
    role.map_paths(|p| call.host_path(p));
    let mut output = InContainerPaths::new(&call);
    let log = output.clone();
    // What the role logs goes to the container's log, as the process's stderr would.
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || log.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let mut out = output.clone();
    let done = async {
        let client = client_from(&call.kubeconfig).await?;
        run_role(role, client, &env, &mut out).await
    }
    .with_subscriber(subscriber)
    .await;
    match done {
        Ok(()) => 0,
        Err(e) => {
            let _ = output.write_all(format!("{}\n", crate::error_chain(&e)).as_bytes());
            1
        }
    }
}

/// The first write of `role` the container's file system would refuse (a read-only
/// mount or root), as the error the process would meet: the sandbox refuses it, so
/// running in-process must too.
fn refused_write(role: &AdapterRole, call: &AdapterCall) -> Option<String> {
    role.writes().into_iter().find_map(|w| {
        let path = match w {
            // An existing directory is not created again, so nothing is written.
            Written::Dir(d) if call.host_path(&d).is_dir() => return None,
            Written::Dir(p) | Written::File(p) => p,
        };
        call.is_read_only(&path).then(|| {
            let e = std::io::Error::from_raw_os_error(libc::EROFS);
            format!("{}: {e}", path.display())
        })
    })
}

/// The container's log with paths as the container sees them: a mount's host directory
/// reads as its mount point and the container's root as `/`, so a line reads
/// `/kratix/input/object.yaml`, as the process's did. Every line reaches it in one write.
#[derive(Clone)]
struct InContainerPaths {
    out: plinth_runner::adapter::AdapterOutput,
    /// Host prefix → container prefix, longest host prefix first.
    prefixes: Vec<(String, String)>,
}

impl InContainerPaths {
    fn new(call: &AdapterCall) -> Self {
        let with_slash = |p: &Path| format!("{}/", p.to_string_lossy().trim_end_matches('/'));
        let mut prefixes: Vec<(String, String)> = call
            .mounts
            .iter()
            .map(|m| {
                let at = with_slash(Path::new(&m.container_path));
                (with_slash(&m.host_path), at)
            })
            .collect();
        prefixes.push((with_slash(&call.root), "/".into()));
        prefixes.sort_by_key(|(host, _)| std::cmp::Reverse(host.len()));
        InContainerPaths {
            out: call.output.clone(),
            prefixes,
        }
    }
}

impl Write for InContainerPaths {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        if self.prefixes.iter().any(|(host, _)| text.contains(host)) {
            let mut cut = text.into_owned();
            for (host, at) in &self.prefixes {
                cut = cut.replace(host, at);
            }
            self.out.write_all(cut.as_bytes())?;
        } else {
            self.out.write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A client with the Pod's ServiceAccount identity, from its kubeconfig.
async fn client_from(kubeconfig: &str) -> anyhow::Result<kube::Client> {
    let context = "reading the Pod's ServiceAccount kubeconfig";
    let file = kube::config::Kubeconfig::from_yaml(kubeconfig).context(context)?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(file, &options)
        .await
        .context(context)?;
    kube::Client::try_from(config).context("building a client from the Pod's kubeconfig")
}

/// The role `args` name. A flag the process would take from an environment variable
/// (`--input-dir` from `INPUT_DIR`, ...) takes it from the container's environment here:
/// clap reads such variables from the process, which is the runner's.
fn parse_role(args: &[String], env: EnvLookup<'_>) -> Result<AdapterRole, clap::Error> {
    let described = AdapterCli::command();
    let mut from_env = Vec::new();
    if let Some(role) = args.first().and_then(|r| described.find_subcommand(r)) {
        for a in role.get_arguments() {
            let (Some(var), Some(long)) = (a.get_env().and_then(|v| v.to_str()), a.get_long())
            else {
                continue;
            };
            let flag = format!("--{long}");
            let given = args
                .iter()
                .any(|x| *x == flag || x.starts_with(&format!("{flag}=")));
            if let (false, Some(value)) = (given, env(var)) {
                from_env.push(format!("{flag}={value}"));
            }
        }
    }
    let mut argv = args.to_vec();
    let at = argv.len().min(1);
    argv.splice(at..at, from_env);
    let matches = AdapterCli::command()
        .mut_subcommands(|role| role.mut_args(|a| a.env(None)))
        .try_get_matches_from(argv)?;
    Ok(AdapterCli::from_arg_matches(&matches)?.role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_take_their_variables_from_the_container_not_the_process() {
        let env = HashMap::from([
            ("KRATIX_HEALTH_DEFINITION_NAME", "web-health"),
            ("KRATIX_HEALTH_DEFINITION_NAMESPACE", "apps"),
            ("KRATIX_PROMISE_NAME", "web"),
            ("KRATIX_OBJECT_NAME", "one"),
            ("KRATIX_OBJECT_NAMESPACE", "default"),
            ("OUTPUT_DIR", "/from/env"),
        ]);
        let lookup = |k: &str| env.get(k).map(|v| v.to_string());
        let role = parse_role(&args(&["health-state-creator"]), &lookup).unwrap();
        let AdapterRole::HealthStateCreator(h) = role else {
            panic!("health-state-creator expected")
        };
        assert_eq!(h.definition, "web-health");
        assert_eq!(h.output_dir, PathBuf::from("/from/env"));
        // The command line wins over the environment, as with clap's own lookup.
        let role = parse_role(
            &args(&["health-state-creator", "--output-dir=/flag"]),
            &lookup,
        )
        .unwrap();
        let AdapterRole::HealthStateCreator(h) = role else {
            panic!("health-state-creator expected")
        };
        assert_eq!(h.output_dir, PathBuf::from("/flag"));
        // Nothing from the environment: the flag's default, and a missing required flag
        // is clap's usage error.
        let none = |_: &str| None;
        let AdapterRole::Reader(r) = parse_role(&args(&["reader"]), &none).unwrap() else {
            panic!("reader expected")
        };
        assert_eq!(
            r.input_dir,
            PathBuf::from(plinth_pipeline::contract::INPUT_DIR)
        );
        let Err(e) = parse_role(&args(&["health-state-creator"]), &none) else {
            panic!("a missing --definition is an error")
        };
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--definition"), "{e}");
    }

    #[test]
    fn the_reader_may_not_write_where_a_read_only_mount_is() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        // The output volume's directory exists; the mount resolves to it.
        std::fs::create_dir_all(tmp.path().join("kratix/output")).unwrap();
        let log =
            plinth_runner::logfile::RotatingLog::create(&tmp.path().join("log"), 4096, 1).unwrap();
        let mount = |at: &str, read_only| plinth_runner::mount::Mount {
            host_path: tmp.path().join(at.trim_start_matches('/')),
            container_path: at.into(),
            read_only,
        };
        let mut call = AdapterCall {
            args: vec![],
            env: vec![],
            root: root.clone(),
            working_dir: "/".into(),
            mounts: vec![mount("/kratix/input", false), mount("/kratix/output", true)],
            read_only_root: true,
            kubeconfig: String::new(),
            output: plinth_runner::adapter::AdapterOutput::new(log),
        };
        let none = |_: &str| None;
        let reader = parse_role(&args(&["reader"]), &none).unwrap();
        // The read-only output directory exists already, so the reader writes nothing there.
        assert_eq!(refused_write(&reader, &call), None);
        call.mounts[0].read_only = true;
        let refused = refused_write(&reader, &call).expect("a read-only input directory");
        assert!(
            refused.starts_with("/kratix/input: Read-only file system"),
            "{refused}"
        );
        let elsewhere = parse_role(&args(&["reader", "--input-dir", "/tmp/in"]), &none).unwrap();
        let refused = refused_write(&elsewhere, &call).expect("a read-only root");
        assert!(refused.starts_with("/tmp/in: "), "{refused}");
        let writer = parse_role(&args(&["update-status"]), &none).unwrap();
        assert_eq!(
            refused_write(&writer, &call),
            None,
            "writes through the API only"
        );
    }

    #[test]
    fn the_alias_parses_and_paths_map_under_the_root() {
        let none = |_: &str| None;
        let role = parse_role(&args(&["update-status", "--metadata-dir", "/m"]), &none).unwrap();
        assert!(matches!(role, AdapterRole::StatusWriter(s) if s.metadata_dir == Path::new("/m")));
        let wc = "work-creator --input-directory /wc --promise-name p --pipeline-name x --workflow-type promise";
        let mut role = parse_role(&args(&wc.split(' ').collect::<Vec<_>>()), &none).unwrap();
        role.map_paths(|p| Path::new("/root").join(p.strip_prefix("/").unwrap()));
        let AdapterRole::WorkCreator(w) = role else {
            panic!("work-creator expected")
        };
        assert_eq!(w.input_directory, PathBuf::from("/root/wc"));
        // The directories under it are mapped each on its own (each may be a mount).
        assert_eq!(w.output_dir, Some(PathBuf::from("/root/wc/input")));
        assert_eq!(w.metadata_dir, Some(PathBuf::from("/root/wc/metadata")));
    }
}
