//! `plinth test [DIR]`: render every test case of a Promise and compare with its
//! expectations.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;

use crate::authoring::layout;
use crate::authoring::render::PlainLines;
use crate::authoring::testing::{Outcome, find_cases, run_case};

/// Arguments of `plinth test`.
#[derive(clap::Args)]
#[command(
    long_about = "Runs the Promise's test cases. A case is a folder tests/<case>/ holding \
request.yaml and optionally status.yaml (an existing status), destinations.yaml, objects.yaml \
(extra objects applied first), and expected/ (status.yaml, selectors.yaml and \
outputs/<destination>/<path> for every file written). Each case is rendered as `plinth render` \
does and compared with expected/ YAML-aware (key order and formatting do not matter); \
differences are shown as unified diffs. Exits non-zero when a case fails.",
    after_help = "Examples:\n  plinth test\n  plinth test path/to/promise --update\n  \
plinth test --case example"
)]
pub struct TestArgs {
    /// The Promise directory (its promise.yaml, or split files, and tests/).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The Promise file [default: the directory's Promise].
    #[arg(long)]
    promise: Option<PathBuf>,
    /// Record what each case produces as its expectations.
    #[arg(long)]
    update: bool,
    /// Run only this case (repeatable).
    #[arg(long)]
    case: Vec<String>,
    /// Image map for the runner [default: images.yaml of the directory, when present].
    #[arg(long, env = "PLINTH_IMAGE_MAP")]
    image_map: Option<PathBuf>,
    /// Give up on a case after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
}

/// Runs `plinth test`; fails when any case fails.
pub async fn run(args: TestArgs) -> anyhow::Result<()> {
    let promise = match &args.promise {
        Some(p) => crate::cmd::render::read_promise(p)?,
        None => layout::assemble(&args.dir, None)?,
    };
    let image_map = args.image_map.clone().or_else(|| {
        let m = args.dir.join(layout::IMAGES_FILE);
        m.is_file().then(|| m.canonicalize().unwrap_or(m))
    });
    let mut cases = find_cases(&args.dir)?;
    if !args.case.is_empty() {
        cases.retain(|c| {
            c.file_name()
                .is_some_and(|n| args.case.iter().any(|w| n.to_string_lossy() == *w))
        });
    }
    if cases.is_empty() {
        bail!(
            "no test cases in {}/tests (a case is a folder holding request.yaml)",
            args.dir.display()
        );
    }
    let (mut passed, mut failed, mut updated) = (0, 0, 0);
    for case in &cases {
        let name = case.file_name().unwrap_or_default().to_string_lossy();
        eprintln!("running case {name}");
        let outcome = run_case(
            case,
            &promise,
            image_map.as_deref(),
            args.update,
            Duration::from_secs(args.timeout),
            &PlainLines,
        )
        .await;
        match outcome {
            Ok(Outcome::Passed) => {
                passed += 1;
                println!("PASS {name}");
            }
            Ok(Outcome::Updated) => {
                updated += 1;
                println!("UPDATED {name}");
            }
            Ok(Outcome::Failed(text)) => {
                failed += 1;
                println!("FAIL {name}\n{text}");
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {name}\n{e:#}");
            }
        }
    }
    if args.update {
        println!("{updated} updated, {failed} failed");
    } else {
        println!("{passed} passed, {failed} failed");
    }
    if failed > 0 {
        bail!("{failed} of {} test cases failed", cases.len());
    }
    Ok(())
}
