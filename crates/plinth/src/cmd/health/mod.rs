//! `plinth health [PROMISE [NAMESPACE/NAME]]`: the health of resource requests as the
//! platform recorded it — state, uptime over 1 h / 24 h / 7 d / 30 d, time to first
//! healthy, last recovery and a 24-hour text timeline; per Promise the combined uptime.
//! `-o json|csv` exports each request's state changes (`status.healthHistory`) within
//! `--since` instead: time, Promise, namespace, name, from, to and the deciding record.

use clap::Args;

mod report;

/// Arguments of `plinth health`.
#[derive(Args, Debug)]
pub struct HealthArgs {
    #[command(flatten)]
    pub requests: super::requests::RequestsArgs,
    /// `table` (uptime and timeline), or the state changes as `json` (an array of
    /// objects) or `csv` (time, promise, namespace, name, from, to, record).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// With `-o json|csv`: only changes at most this long ago, e.g. `30m`, `24h`, `7d`,
    /// `2w` (the history keeps 30 days).
    #[arg(long, default_value = "7d", value_parser = parse_since)]
    pub since: std::time::Duration,
}

/// `plinth health -o`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The uptime table.
    Table,
    /// State changes as a JSON array.
    Json,
    /// State changes as CSV.
    Csv,
}

/// `--since`: a whole number followed by `s`, `m`, `h`, `d` or `w`.
fn parse_since(s: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("{s:?}: expected a number and a unit (s, m, h, d, w), e.g. 7d");
    let unit = s.chars().last().ok_or_else(bad)?;
    let n: u64 = s[..s.len() - unit.len_utf8()].parse().map_err(|_| bad())?;
    let secs = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(secs)
        .map(std::time::Duration::from_secs)
        .ok_or_else(bad)
}

/// Prints the health table.
pub async fn run(args: HealthArgs) -> anyhow::Result<()> {
    let request = args.requests.request()?;
    let client = args.requests.client().await?;
    let promise = args.requests.promise.as_deref();
    let rows = report::collect(&client, promise, request).await?;
    let now = jiff::Timestamp::now();
    if args.output != Output::Table {
        let since = jiff::SignedDuration::try_from(args.since)
            .ok()
            .and_then(|d| now.checked_sub(d).ok())
            .unwrap_or(jiff::Timestamp::MIN);
        let changes = report::changes(&rows, since);
        match args.output {
            Output::Json => println!("{}", serde_json::to_string_pretty(&changes)?),
            _ => print!("{}", report::changes_csv(&changes)),
        }
        return Ok(());
    }
    if rows.is_empty() {
        println!("No resource requests.");
        return Ok(());
    }
    let out = report::render(&rows, now, request.is_some());
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_since;
    use std::time::Duration;

    #[test]
    fn since_takes_a_number_and_a_unit() {
        assert_eq!(parse_since("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_since("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_since("2w"), Ok(Duration::from_secs(14 * 86_400)));
        for bad in ["", "d", "7", "7x", "-1d", "1.5h"] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}
