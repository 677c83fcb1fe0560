//! The status tree as terminal text: one line per object with box-drawing branches;
//! with `colour`, good states green, failures red and work in progress yellow (ANSI).

use super::tree::{Cond, JobNode, PlacementNode, PromiseNode, RequestNode, WorkNode, health_bad};

/// A line of the tree and its children.
struct Line {
    text: String,
    children: Vec<Line>,
}

/// How a word is coloured.
#[derive(Clone, Copy)]
enum Tone {
    Good,
    Bad,
    Busy,
}

struct Painter {
    colour: bool,
}

impl Painter {
    fn paint(&self, word: &str, tone: Tone) -> String {
        if !self.colour || word.is_empty() {
            return word.to_string();
        }
        let code = match tone {
            Tone::Good => "32",
            Tone::Bad => "31",
            Tone::Busy => "33",
        };
        format!("\x1b[{code}m{word}\x1b[0m")
    }

    /// Colours a state word by what it means.
    fn state(&self, word: &str) -> String {
        let tone = match word {
            "True" | "Succeeded" | "Available" | "healthy" | "ready" => Tone::Good,
            "False" | "Failed" | "Unavailable" | "unhealthy" => Tone::Bad,
            w if health_bad(w) => Tone::Bad,
            _ => Tone::Busy,
        };
        self.paint(word, tone)
    }
}

/// Renders the trees; `colour` adds ANSI colours (only on a terminal).
pub fn render(tree: &[PromiseNode], colour: bool) -> String {
    let p = Painter { colour };
    if tree.is_empty() {
        return "No Promises.\n".to_string();
    }
    let mut out = String::new();
    for promise in tree {
        let line = promise_line(&p, promise);
        out.push_str(&line.text);
        out.push('\n');
        write_children(&mut out, &line.children, "");
    }
    out
}

fn write_children(out: &mut String, children: &[Line], prefix: &str) {
    for (i, c) in children.iter().enumerate() {
        let last = i + 1 == children.len();
        out.push_str(prefix);
        out.push_str(if last { "└─ " } else { "├─ " });
        out.push_str(&c.text);
        out.push('\n');
        let deeper = format!("{prefix}{}", if last { "   " } else { "│  " });
        write_children(out, &c.children, &deeper);
    }
}

fn promise_line(p: &Painter, n: &PromiseNode) -> Line {
    let mut children: Vec<Line> = n.jobs.iter().map(|j| job_line(p, j)).collect();
    children.extend(n.works.iter().map(|w| work_line(p, w)));
    children.extend(n.requests.iter().map(|r| request_line(p, r)));
    let status = if n.status.is_empty() {
        p.paint("Pending", Tone::Busy)
    } else {
        p.state(&n.status)
    };
    Line {
        text: format!(
            "Promise {}  {status}{}",
            n.name,
            false_conditions(p, &n.conditions)
        ),
        children,
    }
}

fn request_line(p: &Painter, r: &RequestNode) -> Line {
    let mut children: Vec<Line> = r.jobs.iter().map(|j| job_line(p, j)).collect();
    children.extend(r.works.iter().map(|w| work_line(p, w)));
    if let Some(h) = &r.health {
        children.push(Line {
            text: format!("health {}", p.state(h)),
            children: vec![],
        });
    }
    let conds: Vec<String> = r
        .conditions
        .iter()
        .map(|c| format!("{}={}", c.type_, p.state(&c.status)))
        .collect();
    Line {
        text: format!(
            "Request {}/{}  {}{}",
            r.namespace,
            r.name,
            conds.join(" "),
            false_conditions(p, &r.conditions)
        ),
        children,
    }
}

/// The messages of False conditions, which say what went wrong.
fn false_conditions(p: &Painter, conds: &[Cond]) -> String {
    conds
        .iter()
        .filter(|c| c.status == "False" && !c.message.is_empty())
        .map(|c| format!("  {}: {}", c.type_, p.paint(&c.message, Tone::Bad)))
        .collect()
}

fn job_line(p: &Painter, j: &JobNode) -> Line {
    let duration = j
        .duration_seconds
        .map(|s| format!("  {}", human_secs(s)))
        .unwrap_or_default();
    Line {
        text: format!(
            "Job {}  pipeline {}  {}{duration}",
            j.name,
            j.pipeline,
            p.state(&j.phase)
        ),
        children: vec![],
    }
}

fn work_line(p: &Painter, w: &WorkNode) -> Line {
    let ready = if w.ready.is_empty() {
        String::new()
    } else {
        format!("  Ready={}", p.state(&w.ready))
    };
    Line {
        text: format!("Work {}{ready}", w.name),
        children: w
            .placements
            .iter()
            .map(|pl| placement_line(p, pl))
            .collect(),
    }
}

fn placement_line(p: &Painter, pl: &PlacementNode) -> Line {
    let version = pl
        .version
        .as_deref()
        .map(|v| format!("  commit {}", &v[..v.len().min(12)]))
        .unwrap_or_else(|| "  not written".to_string());
    let ready = if pl.ready.is_empty() {
        String::new()
    } else {
        format!("  Ready={}", p.state(&pl.ready))
    };
    let message = if pl.message.is_empty() {
        String::new()
    } else {
        format!("  {}", p.paint(&pl.message, Tone::Bad))
    };
    Line {
        text: format!(
            "WorkPlacement {} → Destination {}  {} file{}{version}{ready}{message}",
            pl.name,
            pl.destination,
            pl.files,
            if pl.files == 1 { "" } else { "s" }
        ),
        children: vec![],
    }
}

/// `42s`, `3m05s`, `2h01m`.
pub fn human_secs(s: i64) -> String {
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::tree::WorkNode;

    fn tree() -> Vec<PromiseNode> {
        vec![PromiseNode {
            name: "gadget".into(),
            status: "Available".into(),
            conditions: vec![],
            jobs: vec![],
            works: vec![],
            requests: vec![RequestNode {
                namespace: "default".into(),
                name: "mine".into(),
                conditions: vec![Cond {
                    type_: "ConfigureWorkflowCompleted".into(),
                    status: "False".into(),
                    reason: "PipelineFailed".into(),
                    message: "pipeline configure failed".into(),
                }],
                health: Some("healthy".into()),
                jobs: vec![JobNode {
                    name: "job-1".into(),
                    namespace: "default".into(),
                    pipeline: "configure".into(),
                    phase: "Failed".into(),
                    started: None,
                    duration_seconds: Some(65),
                }],
                works: vec![WorkNode {
                    namespace: "default".into(),
                    name: "w".into(),
                    ready: "True".into(),
                    placements: vec![PlacementNode {
                        name: "w.local".into(),
                        destination: "local".into(),
                        files: 1,
                        paths: vec!["a.yaml".into()],
                        contents: vec![],
                        version: Some("0123456789abcdef".into()),
                        ready: "True".into(),
                        message: String::new(),
                    }],
                }],
                failed: true,
            }],
            failed: true,
        }]
    }

    #[test]
    fn plain_tree_has_branches_and_no_escape_codes() {
        let out = render(&tree(), false);
        let expected = "\
Promise gadget  Available
└─ Request default/mine  ConfigureWorkflowCompleted=False  ConfigureWorkflowCompleted: pipeline configure failed
   ├─ Job job-1  pipeline configure  Failed  1m05s
   ├─ Work w  Ready=True
   │  └─ WorkPlacement w.local → Destination local  1 file  commit 0123456789ab  Ready=True
   └─ health healthy
";
        assert_eq!(out, expected);
    }

    #[test]
    fn colour_marks_failures_red_and_success_green() {
        let out = render(&tree(), true);
        assert!(out.contains("\x1b[31mFailed\x1b[0m"), "{out}");
        assert!(out.contains("\x1b[32mhealthy\x1b[0m"), "{out}");
        assert_eq!(render(&[], true), "No Promises.\n");
    }
}
