//! The web view's pages as server-rendered HTML (pure functions of the status tree and
//! what a page reads besides). Every value from the platform goes through [`esc`].

use std::fmt::Write as _;

use jiff::Timestamp;
use plinth_controllers::health::history::HealthHistory;

use crate::status::text::human_secs;
use crate::status::tree::{
    Cond, JobNode, PlacementNode, PromiseNode, RequestNode, WorkNode, health_bad,
};

/// Escapes text for HTML element content and double-quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes one path segment of a link (names are DNS-1123 but are escaped anyway).
fn seg(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

const STYLE: &str = r#"
body{font-family:system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:.6em 1.2em;display:flex;gap:1.5em;align-items:center}
header a{color:#cfe3ff;text-decoration:none}
main{padding:1em 1.5em}
table{border-collapse:collapse;background:#fff;margin-bottom:1.5em}
th,td{border:1px solid #d5d9e0;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#eef1f5}
.ok{color:#17803d}.bad{color:#c4231c;font-weight:600}.busy{color:#a76b00}
.lane{display:flex;gap:.5em;align-items:flex-start;margin:.8em 0}
main{overflow-x:auto}
.col{display:flex;flex-direction:column;gap:.4em;align-items:flex-start;min-width:0}
.box{background:#fff;border:1px solid #aab3c0;border-radius:6px;padding:.4em .6em;max-width:10em;flex:none;overflow-wrap:anywhere;font-size:.85em}
.why{font-weight:600}
.box.fail{border:2px solid #c4231c;background:#fff1f0}
.box small{display:block;color:#556}
.arrow{align-self:center;color:#889}
pre{background:#fff;border:1px solid #d5d9e0;padding:.6em;overflow:auto;max-height:30em}
#live{font-size:.8em;color:#9ab}
"#;

/// Client script: on every change the API's watch reports (server-sent events from
/// `/ui/events`), fetch this page's fragment and replace `<main>`, keeping open the
/// files that were open. A file's content is fetched when its entry is first opened and
/// kept by its address, which names the commit it was listed at.
const SCRIPT: &str = r#"
(function(){
  var live=document.getElementById('live');
  var es=new EventSource('/ui/events');
  var busy=false, again=false, files={};
  function load(d){
    var src=d.getAttribute('data-src'),pre=d.querySelector('pre');
    if(files[src]!==undefined){pre.textContent=files[src];return;}
    fetch(src,{credentials:'same-origin'}).then(function(r){return r.text();})
      .then(function(t){files[src]=t;pre.textContent=t;});
  }
  document.addEventListener('toggle',function(e){
    var d=e.target;if(d.open&&d.hasAttribute&&d.hasAttribute('data-src'))load(d);
  },true);
  function refresh(){
    if(busy){again=true;return;}
    busy=true;
    var open=[].map.call(document.querySelectorAll('details[data-src][open]'),
      function(d){return d.getAttribute('data-src');});
    var u=new URL(location.href);u.searchParams.set('fragment','1');
    fetch(u,{credentials:'same-origin'}).then(function(r){return r.ok?r.text():null;})
      .then(function(t){if(t!==null){document.querySelector('main').innerHTML=t;
        open.forEach(function(src){
          var d=document.querySelector('details[data-src="'+CSS.escape(src)+'"]');
          if(d){d.open=true;load(d);}
        });
        live.textContent='live \u2022 updated '+new Date().toLocaleTimeString();}})
      .finally(function(){busy=false;if(again){again=false;refresh();}});
  }
  es.onopen=function(){live.textContent='live';};
  es.onmessage=refresh;
  es.onerror=function(){live.textContent='reconnecting\u2026';};
})();
"#;

/// A whole page around `body` (the content of `<main>`).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{t} · Plinth</title>\
         <style>{STYLE}</style></head><body><header><strong>Plinth</strong>\
         <a href=\"/ui/\">Promises and requests</a><span id=\"live\"></span></header>\
         <main>{body}</main><script>{SCRIPT}</script></body></html>",
        t = esc(title)
    )
}

/// CSS class of a state word.
fn tone(word: &str) -> &'static str {
    match word {
        "True" | "Succeeded" | "Available" | "healthy" | "ready" => "ok",
        "False" | "Failed" | "Unavailable" | "unhealthy" => "bad",
        w if health_bad(w) => "bad",
        _ => "busy",
    }
}

fn state(word: &str) -> String {
    format!("<span class=\"{}\">{}</span>", tone(word), esc(word))
}

fn conds(cs: &[Cond]) -> String {
    let mut out = String::new();
    for c in cs {
        let _ = write!(out, "<div>{}=<wbr>{}", esc(&c.type_), state(&c.status));
        if c.status != "True" && !c.message.is_empty() {
            let _ = write!(out, " <small>{}</small>", esc(&c.message));
        }
        out.push_str("</div>");
    }
    out
}

fn request_href(promise: &str, r: &RequestNode) -> String {
    format!(
        "/ui/request/{}/{}/{}",
        seg(promise),
        seg(&r.namespace),
        seg(&r.name)
    )
}

/// The overview: every Promise, then every request with its conditions and health.
pub fn overview(tree: &[PromiseNode], requests_from: usize) -> String {
    let mut out = String::from(
        "<h2>Promises</h2><table id=\"promises\"><tr><th>Promise</th><th>Status</th>\
         <th>Requests</th><th>Conditions</th></tr>",
    );
    for p in tree {
        let status = if p.status.is_empty() {
            "Pending"
        } else {
            &p.status
        };
        let _ = write!(
            out,
            "<tr data-promise=\"{n}\"><td><a href=\"/ui/promise/{s}\">{n}</a>{f}</td><td>{st}</td><td>{c}</td><td>{cs}</td></tr>",
            n = esc(&p.name),
            s = seg(&p.name),
            f = if p.failed {
                " <span class=\"bad\">(failures)</span>"
            } else {
                ""
            },
            st = state(status),
            c = p.requests.len(),
            cs = conds(&p.conditions),
        );
    }
    out.push_str(
        "</table><h2>Resource requests</h2><table id=\"requests\"><tr><th>Promise</th>\
         <th>Request</th><th>Conditions</th><th>Health</th><th>Jobs</th></tr>",
    );
    let total: usize = tree.iter().map(|p| p.requests.len()).sum();
    let from = requests_from.min(total.saturating_sub(1));
    let page = tree
        .iter()
        .flat_map(|p| p.requests.iter().map(move |r| (p, r)))
        .skip(from)
        .take(REQUESTS_PER_PAGE);
    for (p, r) in page {
        {
            let last_job = r
                .jobs
                .last()
                .map(|j| state(&j.phase))
                .unwrap_or_else(|| "-".into());
            let _ = write!(
                out,
                "<tr data-request=\"{ns}/{n}\"{cls}><td>{p}</td><td><a href=\"{href}\">{ns}/{n}</a></td>\
                 <td>{cs}</td><td>{h}</td><td>{jobs} {last_job}</td></tr>",
                ns = esc(&r.namespace),
                n = esc(&r.name),
                cls = if r.failed { " class=\"fail\"" } else { "" },
                p = esc(&p.name),
                href = request_href(&p.name, r),
                cs = conds(&r.conditions),
                h = r.health.as_deref().map(state).unwrap_or_else(|| "-".into()),
                jobs = r.jobs.len(),
            );
        }
    }
    out.push_str("</table>");
    out.push_str(&pager(
        total,
        from,
        REQUESTS_PER_PAGE,
        "requests",
        "requests",
    ));
    out
}

fn boxed(class_fail: bool, title: &str, body: &str) -> String {
    format!(
        "<div class=\"box{}\"><b>{}</b>{}</div>",
        if class_fail { " fail" } else { "" },
        title,
        body
    )
}

fn job_box(j: &JobNode) -> String {
    let d = j
        .duration_seconds
        .map(|s| format!(" · {}", human_secs(s)))
        .unwrap_or_default();
    boxed(
        j.phase == "Failed",
        &format!("Job {}", esc(&j.name)),
        &format!(
            "<small>pipeline {} · {}{d}</small>",
            esc(&j.pipeline),
            state(&j.phase)
        ),
    )
}

/// The objects in a placement's files (kind/name of each YAML document), for the map.
pub type Objects<'a> = &'a dyn Fn(&PlacementNode) -> Vec<String>;

fn placement_lane(pl: &PlacementNode, objects: Objects) -> String {
    let commit = pl
        .version
        .as_deref()
        .map(|v| format!("commit {}", esc(&v[..v.len().min(12)])))
        .unwrap_or_else(|| "<span class=\"busy\">not written</span>".into());
    let all = objects(pl);
    let mut objs: String = all
        .iter()
        .take(OBJECTS_SHOWN)
        .map(|o| format!("<small>{}</small>", esc(o)))
        .collect();
    if all.len() > OBJECTS_SHOWN {
        let _ = write!(
            objs,
            "<small>and {} more</small>",
            all.len() - OBJECTS_SHOWN
        );
    }
    let fail = pl.ready == "False";
    format!(
        "<div class=\"lane\">{}<span class=\"arrow\">→</span>{}<span class=\"arrow\">→</span>{}<span class=\"arrow\">→</span>{}</div>",
        boxed(
            fail,
            &format!("WorkPlacement {}", esc(&pl.name)),
            &format!(
                "<small>{} file{} · Ready={}</small>{}",
                pl.files,
                if pl.files == 1 { "" } else { "s" },
                if pl.ready.is_empty() {
                    "-".into()
                } else {
                    state(&pl.ready)
                },
                if pl.message.is_empty() {
                    String::new()
                } else {
                    format!("<small class=\"bad\">{}</small>", esc(&pl.message))
                }
            )
        ),
        boxed(false, &format!("Destination {}", esc(&pl.destination)), ""),
        boxed(fail, &commit, ""),
        boxed(false, "objects in the files", &objs),
    )
}

fn work_col(w: &WorkNode, objects: Objects) -> String {
    let lanes: String = w
        .placements
        .iter()
        .map(|p| placement_lane(p, objects))
        .collect();
    format!(
        "<div class=\"lane\">{}<span class=\"arrow\">→</span><div class=\"col\">{lanes}</div></div>",
        boxed(
            w.ready == "False",
            &format!("Work {}", esc(&w.name)),
            &format!(
                "<small>Ready={}</small>",
                if w.ready.is_empty() {
                    "-".into()
                } else {
                    state(&w.ready)
                }
            )
        )
    )
}

/// The map of one Promise: its own Jobs and Works, then one lane per request
/// (request → Jobs → Works → WorkPlacements → Destination → commit → objects, and
/// health), failures outlined in red.
pub fn map(p: &PromiseNode, objects: Objects, requests_from: usize) -> String {
    let mut out = format!("<h2>Map of Promise {}</h2>", esc(&p.name));
    let jobs = job_boxes(&p.jobs);
    let works: String = p.works.iter().map(|w| work_col(w, objects)).collect();
    let _ = write!(
        out,
        "<div class=\"lane\" id=\"promise-lane\">{}<span class=\"arrow\">→</span><div class=\"col\">{jobs}</div><div class=\"col\">{works}</div></div><h3>Requests</h3>",
        boxed(
            p.failed,
            &format!("Promise {}", esc(&p.name)),
            &format!(
                "<small>{}</small>{}{}",
                state(if p.status.is_empty() {
                    "Pending"
                } else {
                    &p.status
                }),
                conds(&p.conditions),
                why_red(p.failed, &p.conditions, || promise_failure(p))
            )
        ),
    );
    let from = requests_from.min(p.requests.len().saturating_sub(1));
    for r in p.requests.iter().skip(from).take(REQUESTS_PER_PAGE) {
        let jobs = job_boxes(&r.jobs);
        let works: String = r.works.iter().map(|w| work_col(w, objects)).collect();
        let health = r.health.as_deref().map(state).unwrap_or_else(|| "-".into());
        let _ = write!(
            out,
            "<div class=\"lane\" data-request=\"{ns}/{n}\">{req}<span class=\"arrow\">→</span><div class=\"col\">{jobs}</div>\
             <span class=\"arrow\">→</span><div class=\"col\">{works}</div><span class=\"arrow\">→</span>{h}</div>",
            ns = esc(&r.namespace),
            n = esc(&r.name),
            req = boxed(
                r.failed,
                &format!(
                    "<a href=\"{}\">{}/{}</a>",
                    request_href(&p.name, r),
                    esc(&r.namespace),
                    esc(&r.name)
                ),
                &(conds(&r.conditions) + &why_red(r.failed, &r.conditions, || request_failure(r)))
            ),
            h = boxed(
                r.health.as_deref().is_some_and(health_bad),
                "health",
                &format!("<small>{health}</small>")
            ),
        );
    }
    out.push_str(&pager(
        p.requests.len(),
        from,
        REQUESTS_PER_PAGE,
        "requests",
        "requests",
    ));
    out
}

/// Why a box is outlined red, said in the box when its own conditions do not show it
/// (a False condition shows its message already): what failed further right on the
/// map (a Job, a Work, a request, or a request's health).
fn why_red(failed: bool, conditions: &[Cond], why: impl FnOnce() -> String) -> String {
    if !failed || conditions.iter().any(|c| c.status == "False") {
        return String::new();
    }
    format!(
        "<small class=\"bad why\">red because {}</small>",
        esc(&why())
    )
}

/// What failed below a Promise, in a few words.
fn promise_failure(p: &PromiseNode) -> String {
    if let Some(j) = p.jobs.iter().rev().find(|j| j.phase == "Failed") {
        return format!("Job {} failed", j.name);
    }
    if let Some(w) = p.works.iter().find(|w| w.ready == "False") {
        return format!("Work {} is not Ready", w.name);
    }
    match p.requests.iter().find(|r| r.failed) {
        Some(r) => format!(
            "request {}/{} failed: {}",
            r.namespace,
            r.name,
            request_failure(r)
        ),
        None => "something below it failed".into(),
    }
}

/// What failed in a request, in a few words.
fn request_failure(r: &RequestNode) -> String {
    if let Some(c) = r.conditions.iter().find(|c| c.status == "False") {
        return format!("{} is False", c.type_);
    }
    if let Some(j) = r.jobs.iter().rev().find(|j| j.phase == "Failed") {
        return format!("Job {} failed", j.name);
    }
    if let Some(w) = r.works.iter().find(|w| w.ready == "False") {
        return format!("Work {} is not Ready", w.name);
    }
    match r.health.as_deref() {
        Some(h) if health_bad(h) => format!("its health is {h}"),
        _ => "see its lane".into(),
    }
}

/// Files listed from a state store: `(version, [(Destination, path)])`. The page loads
/// a file's content when it is opened, one file at a time.
pub type Files = (String, Vec<(String, String)>);

/// Files listed per page of a request (`?files=N` shows the next ones).
pub const FILES_PER_PAGE: usize = 100;
/// Requests per page of the overview and of a Promise's map (`?requests=N`).
pub const REQUESTS_PER_PAGE: usize = 50;
/// Objects named per WorkPlacement on the map.
pub const OBJECTS_SHOWN: usize = 20;
/// Workflow Jobs shown per request or Promise (the newest).
pub const JOBS_SHOWN: usize = 10;
/// Bytes shown of one container's log (its end).
pub const LOG_SHOWN: usize = 32 * 1024;
/// Bytes of pipeline logs on one request page; logs past it are named, not shown.
pub const LOG_BUDGET: usize = 256 * 1024;

/// What the request page shows besides the tree.
pub struct RequestExtras {
    /// Files the request wrote, as (Destination, path, content), and the commit (or
    /// version) they were read at, or why they could not be read.
    pub files: Result<Files, String>,
    /// Pipeline logs: (Job, container, log text).
    pub logs: Vec<(String, String, String)>,
    /// The first file listed (`?files=N`).
    pub files_from: usize,
    /// The request's health history.
    pub history: HealthHistory,
}

/// The page of one request: conditions, health (state and chart), Jobs, the files it
/// wrote with the commit, and the pipeline logs.
pub fn request(promise: &str, r: &RequestNode, x: &RequestExtras, now: Timestamp) -> String {
    let mut out = format!(
        "<h2 data-request=\"{ns}/{n}\">Request {ns}/{n} <small>of Promise <a href=\"/ui/promise/{ps}\">{p}</a></small></h2>\
         <h3>Conditions</h3>{c}<h3>Health: {h}</h3>{chart}{changes}<h3>Workflow Jobs</h3><div class=\"col\">{jobs}</div>",
        ns = esc(&r.namespace),
        n = esc(&r.name),
        ps = seg(promise),
        p = esc(promise),
        c = conds(&r.conditions),
        h = r
            .health
            .as_deref()
            .map(state)
            .unwrap_or_else(|| "no health records".into()),
        chart = health_chart(&x.history, now),
        changes = health_changes(&x.history),
        jobs = job_boxes(&r.jobs),
    );
    out.push_str("<h3>Files written</h3>");
    match &x.files {
        Err(e) => {
            let _ = write!(out, "<p class=\"bad\">{}</p>", esc(e));
        }
        Ok((_, files)) if files.is_empty() => out.push_str("<p>No files yet.</p>"),
        Ok((version, files)) => {
            let _ = write!(
                out,
                "<p id=\"commit\">at commit <code>{}</code></p>",
                esc(version)
            );
            let from = x.files_from.min(files.len().saturating_sub(1));
            for (dest, path) in files.iter().skip(from).take(FILES_PER_PAGE) {
                let _ = write!(
                    out,
                    "<details class=\"file\" data-src=\"{src}?destination={d}&amp;path={p}&amp;at={v}\"><summary>{path} \
                     <small>(Destination {dest})</small></summary><pre>loading…</pre></details>",
                    src = file_href(promise, r),
                    v = seg(version),
                    d = seg(dest),
                    p = seg(path),
                    path = esc(path),
                    dest = esc(dest),
                );
            }
            out.push_str(&pager(files.len(), from, FILES_PER_PAGE, "files", "files"));
        }
    }
    out.push_str("<h3>Pipeline logs</h3>");
    if x.logs.is_empty() {
        out.push_str("<p>No pipeline logs.</p>");
    }
    let mut budget = LOG_BUDGET;
    for (job, container, log) in &x.logs {
        let shown = tail(log, LOG_SHOWN.min(budget));
        budget -= shown.len();
        if shown.is_empty() && !log.is_empty() {
            let _ = write!(
                out,
                "<p><small>{} / {}: not shown (this page's log budget is spent); \
                 <code>kubectl logs -l job-name={} -c {}</code></small></p>",
                esc(job),
                esc(container),
                esc(job),
                esc(container)
            );
            continue;
        }
        let _ = write!(
            out,
            "<details><summary>{} / {}</summary><pre>{}{}</pre></details>",
            esc(job),
            esc(container),
            if shown.len() < log.len() {
                "… (earlier lines cut)\n"
            } else {
                ""
            },
            esc(shown)
        );
    }
    out
}

/// The last `max` bytes of `text`, starting at a line when one starts in them.
fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let cut = &text[start..];
    match cut.find('\n') {
        Some(i) if i + 1 < cut.len() => &cut[i + 1..],
        _ => cut,
    }
}

/// Where the page loads one of the request's files from (`?destination=&path=`).
fn file_href(promise: &str, r: &RequestNode) -> String {
    format!(
        "/ui/file/{}/{}/{}",
        seg(promise),
        seg(&r.namespace),
        seg(&r.name)
    )
}

/// "11–20 of 35" with links to the previous and next pages (`?param=N`); empty when
/// everything fits on one page.
fn pager(total: usize, from: usize, per_page: usize, param: &str, what: &str) -> String {
    if total <= per_page {
        return String::new();
    }
    let mut out = format!(
        "<p class=\"pager\">{what} {}–{} of {total}",
        from + 1,
        (from + per_page).min(total)
    );
    if from > 0 {
        let _ = write!(
            out,
            " · <a href=\"?{param}={}\">previous {per_page}</a>",
            from.saturating_sub(per_page)
        );
    }
    if from + per_page < total {
        let _ = write!(
            out,
            " · <a href=\"?{param}={}\">next {per_page}</a>",
            from + per_page
        );
    }
    out.push_str("</p>");
    out
}

/// The newest [`JOBS_SHOWN`] Jobs as boxes, and how many earlier ones are left out.
fn job_boxes(jobs: &[JobNode]) -> String {
    let skip = jobs.len().saturating_sub(JOBS_SHOWN);
    let mut out: String = jobs[skip..].iter().map(job_box).collect();
    if skip > 0 {
        let _ = write!(out, "<small>and {skip} earlier Jobs</small>");
    }
    out
}

/// Health state changes listed on a request page (the newest).
pub const CHANGES_SHOWN: usize = 50;

/// The request's health state changes, newest first, each with the state it left and
/// the HealthRecord that decided it (at most [`CHANGES_SHOWN`]; `plinth health -o csv`
/// exports them all).
pub fn health_changes(h: &HealthHistory) -> String {
    if h.transitions.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<table class=\"health-history\"><tr><th>Time</th><th>From</th><th>To</th><th>Deciding record</th></tr>",
    );
    let n = h.transitions.len();
    for i in (n.saturating_sub(CHANGES_SHOWN)..n).rev() {
        let t = &h.transitions[i];
        let from = i
            .checked_sub(1)
            .map(|j| state(&h.transitions[j].state))
            .unwrap_or_else(|| "-".into());
        let record = if t.source.is_empty() {
            "<small>(last record removed)</small>".to_string()
        } else {
            format!("<code>{}</code>", esc(&t.source))
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{from}</td><td>{}</td><td>{record}</td></tr>",
            esc(&t.time),
            state(&t.state),
        );
    }
    out.push_str("</table>");
    if n > CHANGES_SHOWN {
        let _ = write!(
            out,
            "<small>and {} earlier changes (<code>plinth health -o csv</code>)</small>",
            n - CHANGES_SHOWN
        );
    }
    out
}

/// Width and height of the health chart, in SVG user units.
const CHART_W: f64 = 720.0;
const CHART_H: f64 = 40.0;
/// The chart's span: the last 24 hours, in seconds.
const CHART_SECS: i64 = 86_400;

fn chart_colour(state: &str) -> &'static str {
    match state {
        "healthy" | "ready" => "#2e9e55",
        "degraded" => "#e0a100",
        "unhealthy" => "#c4231c",
        _ => "#9aa5b5",
    }
}

/// Health over the last 24 hours as an inline SVG: one coloured bar per state span,
/// from each transition to the next (the last one to now).
pub fn health_chart(h: &HealthHistory, now: Timestamp) -> String {
    let end = now.as_second();
    let start = end - CHART_SECS;
    let x = |t: i64| (t.clamp(start, end) - start) as f64 * CHART_W / CHART_SECS as f64;
    let times: Vec<(i64, &str)> = h
        .transitions
        .iter()
        .filter_map(|t| {
            Some((
                t.time.parse::<Timestamp>().ok()?.as_second(),
                t.state.as_str(),
            ))
        })
        .collect();
    let mut bars = String::new();
    for (i, (t, s)) in times.iter().enumerate() {
        let next = times.get(i + 1).map(|(n, _)| *n).unwrap_or(end);
        if next <= start {
            continue;
        }
        // At least 3 units wide, so a state entered moments ago is visible.
        let (x0, x1) = (x(*t).min(CHART_W - 3.0), x(next));
        let _ = write!(
            bars,
            "<rect class=\"span\" x=\"{x0:.1}\" y=\"0\" width=\"{:.1}\" height=\"{CHART_H}\" fill=\"{}\"><title>{}</title></rect>",
            (x1 - x0).max(3.0),
            chart_colour(s),
            esc(s)
        );
    }
    format!(
        "<svg class=\"health-chart\" width=\"{CHART_W}\" height=\"{h}\" viewBox=\"0 0 {CHART_W} {h}\" role=\"img\">\
         <rect x=\"0\" y=\"0\" width=\"{CHART_W}\" height=\"{CHART_H}\" fill=\"#eef1f5\"/>{bars}\
         <text x=\"0\" y=\"{ty}\" font-size=\"11\">24 h ago</text><text x=\"{CHART_W}\" y=\"{ty}\" font-size=\"11\" text-anchor=\"end\">now</text></svg>",
        h = CHART_H + 14.0,
        ty = CHART_H + 12.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use plinth_controllers::health::history::Transition;

    fn req(name: &str, message: &str) -> RequestNode {
        RequestNode {
            namespace: "default".into(),
            name: name.into(),
            conditions: vec![Cond {
                type_: "ConfigureWorkflowCompleted".into(),
                status: "False".into(),
                reason: "Failed".into(),
                message: message.into(),
            }],
            health: Some("<b>unhealthy</b>".into()),
            jobs: vec![],
            works: vec![],
            failed: true,
        }
    }

    fn promise(r: RequestNode) -> PromiseNode {
        PromiseNode {
            name: "gadget".into(),
            status: "Available".into(),
            conditions: vec![],
            jobs: vec![],
            works: vec![WorkNode {
                namespace: "default".into(),
                name: "w".into(),
                ready: "False".into(),
                placements: vec![PlacementNode {
                    name: "w.local".into(),
                    destination: "<img src=x>".into(),
                    files: 1,
                    paths: vec!["a.yaml".into()],
                    contents: vec![],
                    version: None,
                    ready: "False".into(),
                    message: "path \"../x\" escapes".into(),
                }],
            }],
            requests: vec![r],
            failed: true,
        }
    }

    #[test]
    fn everything_rendered_is_escaped() {
        let evil = "<script>alert(1)</script>";
        let tree = vec![promise(req(evil, evil))];
        let objects = |_: &PlacementNode| vec![format!("ConfigMap/{evil}")];
        let history = HealthHistory::default();
        let extras = RequestExtras {
            files: Ok(("abc".into(), vec![("local".into(), evil.into())])),
            logs: vec![("job".into(), "c".into(), evil.into())],
            files_from: 0,
            history,
        };
        let pages = [
            page(evil, &overview(&tree, 0)),
            map(&tree[0], &objects, 0),
            request("gadget", &tree[0].requests[0], &extras, Timestamp::now()),
        ];
        for html in &pages {
            assert!(!html.contains("<script>alert"), "unescaped: {html}");
            assert!(!html.contains("<img"), "unescaped: {html}");
            assert!(!html.contains("<b>unhealthy"), "unescaped: {html}");
        }
        assert!(pages[1].contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(pages[2].contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        // Links percent-encode the name.
        assert!(
            pages[0].contains("/ui/request/gadget/default/%3Cscript%3Ealert%281%29%3C%2Fscript%3E")
        );
    }

    #[test]
    fn failures_are_highlighted_on_the_map() {
        let tree = promise(req("mine", "pipeline failed"));
        let html = map(&tree, &|_| vec![], 0);
        // Promise, request, Work, WorkPlacement and the unwritten commit: outlined.
        assert!(html.matches("box fail").count() >= 5, "{html}");
        assert!(html.contains("path &quot;../x&quot; escapes"), "{html}");
    }

    #[test]
    fn a_request_page_lists_health_changes_with_their_deciding_record() {
        let r = req("a", "x");
        let t = |time: &str, state: &str, source: &str| Transition {
            time: time.into(),
            state: state.into(),
            source: source.into(),
        };
        let mut history = HealthHistory {
            transitions: vec![
                t("2026-01-01T00:00:00Z", "healthy", "default/check"),
                t("2026-01-01T01:00:00Z", "unhealthy", "default/alert-<x>"),
                t("2026-01-01T02:00:00Z", "unknown", ""),
            ],
            ..Default::default()
        };
        let extras = |history: HealthHistory| RequestExtras {
            files: Ok(("abc".into(), vec![])),
            logs: vec![],
            files_from: 0,
            history,
        };
        let html = request("gadget", &r, &extras(history.clone()), Timestamp::now());
        let table = html
            .split_once("<table class=\"health-history\">")
            .unwrap()
            .1;
        let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
        assert_eq!(rows.len(), 3, "{table}");
        assert!(
            rows[0].contains("2026-01-01T02:00:00Z") && rows[0].contains("last record removed")
        );
        assert!(
            rows[1].contains("default/alert-&lt;x&gt;") && rows[1].contains("ok\">healthy"),
            "from healthy to unhealthy, escaped: {}",
            rows[1]
        );
        assert!(rows[2].contains("<td>-</td>") && rows[2].contains("default/check"));
        history.transitions = (0..60)
            .map(|i| t(&format!("2026-01-01T00:{i:02}:00Z"), "healthy", "default/c"))
            .collect();
        let html = request("gadget", &r, &extras(history), Timestamp::now());
        assert_eq!(
            html.matches("<td><code>default/c</code></td>").count(),
            CHANGES_SHOWN
        );
        assert!(html.contains("and 10 earlier changes"));
        let none = request(
            "gadget",
            &r,
            &extras(HealthHistory::default()),
            Timestamp::now(),
        );
        assert!(!none.contains("health-history"));
    }

    /// A request with 1,000 files and long logs in many containers renders a page of a
    /// bounded size: file names paginated and no content (loaded when opened), logs cut
    /// to their end and to the page's budget.
    #[test]
    fn a_request_page_has_a_size_budget() {
        let r = req("big", "x");
        let files: Vec<(String, String)> = (0..1000)
            .map(|i| {
                (
                    "local".to_string(),
                    format!("local/resources/default/gadget/big/f{i:04}.yaml"),
                )
            })
            .collect();
        let log = "a line of a pipeline's log output\n".repeat(20_000);
        let extras = RequestExtras {
            files: Ok(("abc".into(), files.clone())),
            logs: (0..40)
                .map(|i| (format!("job-{i}"), "c".into(), log.clone()))
                .collect(),
            files_from: 0,
            history: HealthHistory::default(),
        };
        let html = request("gadget", &r, &extras, Timestamp::now());
        assert!(html.len() < LOG_BUDGET + 64 * 1024, "{} bytes", html.len());
        assert_eq!(
            html.matches("<details class=\"file\"").count(),
            FILES_PER_PAGE
        );
        assert!(html.contains("files 1–100 of 1000"), "pager");
        assert!(html.contains("href=\"?files=100\""), "next page link");
        assert!(
            html.contains("data-src=\"/ui/file/gadget/default/big?destination=local&amp;path=")
        );
        assert!(html.contains("earlier lines cut"));
        assert!(
            html.contains("log budget is spent"),
            "later logs are named, not shown"
        );
        // The last page.
        let last = RequestExtras {
            files_from: 950,
            ..extras
        };
        let html = request("gadget", &r, &last, Timestamp::now());
        assert_eq!(html.matches("<details class=\"file\"").count(), 50);
        assert!(html.contains("files 951–1000 of 1000") && html.contains("?files=850"));
        assert!(html.contains("f0999.yaml") && !html.contains("f0949.yaml"));
    }

    #[test]
    fn the_map_and_overview_paginate_requests_and_objects() {
        let mut p = promise(req("r0", "x"));
        p.requests = (0..120).map(|i| req(&format!("r{i:03}"), "x")).collect();
        let objects = |_: &PlacementNode| {
            (0..500)
                .map(|i| format!("ConfigMap default/c{i}"))
                .collect()
        };
        let html = map(&p, &objects, 0);
        assert_eq!(html.matches("data-request=").count(), REQUESTS_PER_PAGE);
        assert!(html.contains("requests 1–50 of 120") && html.contains("?requests=50"));
        assert!(html.contains("and 480 more"), "objects capped");
        let html = map(&p, &objects, 100);
        assert_eq!(html.matches("data-request=").count(), 20);
        let tree = vec![p];
        let html = overview(&tree, 50);
        assert_eq!(html.matches("<tr data-request=").count(), REQUESTS_PER_PAGE);
        assert!(html.contains("requests 51–100 of 120"));
    }

    #[test]
    fn a_red_box_says_why_when_its_conditions_do_not() {
        let mut r = req("mine", "");
        r.conditions[0].status = "True".into();
        r.health = Some("unhealthy".into());
        let mut p = promise(r);
        p.works.clear();
        p.conditions = vec![Cond {
            type_: "Available".into(),
            status: "True".into(),
            reason: String::new(),
            message: String::new(),
        }];
        let html = map(&p, &|_| vec![], 0);
        assert!(
            html.contains("red because request default/mine failed: its health is unhealthy"),
            "{html}"
        );
        // A False condition says it already: no second reason.
        let html = map(&promise(req("mine", "boom")), &|_| vec![], 0);
        assert!(!html.contains("red because request"), "{html}");
    }

    #[test]
    fn health_chart_draws_one_bar_per_state_span() {
        let now: Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
        let mut h = HealthHistory::default();
        for (state, time) in [
            ("healthy", "2026-01-01T12:00:00Z"),
            ("unhealthy", "2026-01-01T18:00:00Z"),
        ] {
            h.transitions.push(Transition {
                state: state.into(),
                time: time.into(),
                source: String::new(),
            });
        }
        let svg = health_chart(&h, now);
        assert_eq!(svg.matches("class=\"span\"").count(), 2, "{svg}");
        // 12:00 → 18:00 is a quarter of the day: from x=360 to x=540.
        assert!(svg.contains("x=\"360.0\" y=\"0\" width=\"180.0\""), "{svg}");
        assert!(
            svg.contains("x=\"540.0\" y=\"0\" width=\"180.0\" height=\"40\" fill=\"#c4231c\""),
            "{svg}"
        );
    }
}
