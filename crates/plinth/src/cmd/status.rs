//! `plinth status [PROMISE [NAMESPACE/NAME]]`: the path of every resource request as a
//! tree — Promise → request → workflow Jobs (phase, duration) → Works → WorkPlacements
//! (Destination, file count, commit) and health — read through the Kubernetes API.
//! `--watch` redraws when the API's watch reports a change; `-o json|yaml` prints the
//! same tree as data.

use anyhow::bail;
use clap::{Args, ValueEnum};
use futures::StreamExt as _;
use std::io::{IsTerminal as _, Write as _};

use crate::status::{collect, text, tree};

/// Output formats of `plinth status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The tree as text (colours on a terminal unless NO_COLOR is set).
    Tree,
    /// The tree as JSON (a list of Promises).
    Json,
    /// The tree as YAML (a list of Promises).
    Yaml,
}

/// Arguments of `plinth status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub requests: super::requests::RequestsArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Tree)]
    pub output: Output,
    /// Keep running and print the tree again whenever it changes.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// Prints the tree once, or on every change with `--watch`.
pub async fn run(args: StatusArgs) -> anyhow::Result<()> {
    let request = args.requests.request()?;
    let client = args.requests.client().await?;
    let promise = args.requests.promise.as_deref();
    let tty = std::io::stdout().is_terminal();
    // Colours only on a terminal, and not when NO_COLOR is set (no-color.org).
    let colour = tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let show = |inputs: &tree::Inputs| -> anyhow::Result<String> {
        let nodes = tree::build(inputs, promise, request, jiff::Timestamp::now());
        if let Some(p) = promise {
            if nodes.is_empty() {
                bail!("Promise {p:?} not found");
            }
            if let Some((ns, name)) = request
                && nodes[0].requests.is_empty()
            {
                bail!("request {ns}/{name} of Promise {p:?} not found");
            }
        }
        Ok(match args.output {
            Output::Tree => text::render(&nodes, colour),
            Output::Json => serde_json::to_string_pretty(&nodes)? + "\n",
            Output::Yaml => serde_saphyr::to_string(&nodes)?,
        })
    };
    let inputs = collect::collect(&client).await?;
    let mut last = show(&inputs)?;
    print!("{last}");
    std::io::stdout().flush()?;
    if !args.watch {
        return Ok(());
    }
    let mut kinds = collect::request_resources(&inputs);
    loop {
        // Watch what the tree is built from; a new Promise API restarts the watch so its
        // requests are watched too.
        let mut changes = Box::pin(collect::changes(&client, &kinds));
        while changes.next().await.is_some() {
            let inputs = collect::collect(&client).await?;
            let out = show(&inputs)?;
            if out != last {
                if tty {
                    // Clear the screen and move home, then draw again.
                    print!("\x1b[2J\x1b[H");
                } else {
                    println!("---");
                }
                print!("{out}");
                std::io::stdout().flush()?;
                last = out;
            }
            let now = collect::request_resources(&inputs);
            if now != kinds {
                kinds = now;
                break;
            }
        }
    }
}
