//! The JSONPath subset used by CRD `additionalPrinterColumns` (and `kubectl get -o
//! jsonpath`): `.a.b`, `['a.b']`, `.a[0]`, `.a[-1]`, `.a[*].b`, `.a.*`, `..b` (recursive
//! descent), filters `[?(@.type=="Ready")]` with `==`, `!=`, `<`, `<=`, `>`, `>=` or a
//! bare existence test `[?(@.ready)]`. An optional leading `$` and surrounding `{}` are
//! accepted. Keys may escape dots with a backslash: `.metadata.labels.app\.kubernetes\.io/name`.
//!
//! Source: Kubernetes `k8s.io/client-go/util/jsonpath` (semantics of the subset).

use serde_json::Value;

/// One step of a parsed path.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A named child of an object.
    Field(String),
    /// An array element; negative counts from the end.
    Index(i64),
    /// Every child (`[*]` or `.*`).
    Wildcard,
    /// Every descendant named like the inner field (`..name`).
    Descend(String),
    /// Array elements (or the value itself) matching a filter.
    Filter(Filter),
}

/// `[?(@.path op literal)]`, or an existence test when `op` is `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    /// Path relative to the element (`@`).
    pub path: Vec<Step>,
    /// Comparison operator and literal.
    pub op: Option<(String, Value)>,
}

/// Parse error with the byte offset where parsing stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid JSONPath {path:?} at byte {at}: {reason}")]
pub struct ParseError {
    /// The whole path.
    pub path: String,
    /// Byte offset.
    pub at: usize,
    /// What was expected.
    pub reason: String,
}

/// Parse a JSONPath of the supported subset.
///
/// # Errors
/// [`ParseError`] naming the offset and the reason (unterminated bracket, unknown token, ...).
pub fn parse(path: &str) -> Result<Vec<Step>, ParseError> {
    let mut s = path.trim();
    if let Some(inner) = s.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
        s = inner.trim();
    }
    if let Some(rest) = s.strip_prefix('$') {
        s = rest;
    }
    let mut p = Parser {
        src: s,
        pos: 0,
        whole: path,
    };
    if s.is_empty() {
        return Err(p.err("empty path"));
    }
    if !s.starts_with('.') && !s.starts_with('[') {
        return Err(p.err("must start with '.' or '['"));
    }
    p.steps()
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    whole: &'a str,
}

impl Parser<'_> {
    fn err(&self, reason: &str) -> ParseError {
        ParseError {
            path: self.whole.to_string(),
            at: self.pos,
            reason: reason.to_string(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn steps(&mut self) -> Result<Vec<Step>, ParseError> {
        let mut steps = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                '.' => {
                    if self.rest().starts_with("..") {
                        self.pos += 2;
                        let name = self.ident()?;
                        if name.is_empty() {
                            return Err(self.err("expected a field name after '..'"));
                        }
                        steps.push(Step::Descend(name));
                    } else {
                        self.pos += 1;
                        if self.peek() == Some('*') {
                            self.pos += 1;
                            steps.push(Step::Wildcard);
                        } else if self.peek() == Some('[') || self.peek().is_none() {
                            // `.[0]` or a lone trailing `.` (the object itself).
                        } else {
                            let name = self.ident()?;
                            if name.is_empty() {
                                return Err(self.err("expected a field name"));
                            }
                            steps.push(Step::Field(name));
                        }
                    }
                }
                '[' => {
                    self.pos += 1;
                    steps.push(self.bracket()?);
                }
                _ => return Err(self.err("unexpected character")),
            }
        }
        Ok(steps)
    }

    fn ident(&mut self) -> Result<String, ParseError> {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            match c {
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some(n) => {
                            out.push(n);
                            self.pos += n.len_utf8();
                        }
                        None => return Err(self.err("dangling escape")),
                    }
                }
                '.' | '[' | ']' | ' ' | '(' | ')' | '=' | '!' | '<' | '>' => break,
                _ => {
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
        Ok(out)
    }

    fn bracket(&mut self) -> Result<Step, ParseError> {
        let rest = self.rest().to_string();
        if rest.starts_with("?(") {
            self.pos += 2;
            let f = self.filter()?;
            if !self.rest().starts_with(")]") {
                return Err(self.err("expected ')]' to close the filter"));
            }
            self.pos += 2;
            return Ok(Step::Filter(f));
        }
        if rest.starts_with('\'') || rest.starts_with('"') {
            let q = rest.chars().next().unwrap_or('\'');
            let end = rest[1..]
                .find(q)
                .ok_or_else(|| self.err("unterminated quoted key"))?;
            let key = rest[1..1 + end].to_string();
            self.pos += end + 2;
            if self.peek() != Some(']') {
                return Err(self.err("expected ']'"));
            }
            self.pos += 1;
            return Ok(Step::Field(key));
        }
        let end = rest.find(']').ok_or_else(|| self.err("unterminated '['"))?;
        let inner = rest[..end].trim().to_string();
        self.pos += end + 1;
        if inner == "*" {
            return Ok(Step::Wildcard);
        }
        inner
            .parse::<i64>()
            .map(Step::Index)
            .map_err(|_| self.err("expected an index, '*', a quoted key or a filter"))
    }

    fn filter(&mut self) -> Result<Filter, ParseError> {
        self.skip_ws();
        if self.peek() != Some('@') {
            return Err(self.err("filter must start with '@'"));
        }
        self.pos += 1;
        let mut path = Vec::new();
        while self.peek() == Some('.') || self.peek() == Some('[') {
            if self.peek() == Some('.') {
                self.pos += 1;
                let name = self.ident()?;
                if name.is_empty() {
                    return Err(self.err("expected a field name in filter"));
                }
                path.push(Step::Field(name));
            } else {
                self.pos += 1;
                path.push(self.bracket()?);
            }
        }
        self.skip_ws();
        let rest = self.rest().to_string();
        let op = ["==", "!=", "<=", ">=", "<", ">"]
            .into_iter()
            .find(|o| rest.starts_with(o));
        let Some(op) = op else {
            return Ok(Filter { path, op: None });
        };
        self.pos += op.len();
        self.skip_ws();
        let lit = self.literal()?;
        self.skip_ws();
        Ok(Filter {
            path,
            op: Some((op.to_string(), lit)),
        })
    }

    fn literal(&mut self) -> Result<Value, ParseError> {
        let rest = self.rest().to_string();
        if rest.starts_with('"') || rest.starts_with('\'') {
            let q = rest.chars().next().unwrap_or('"');
            let end = rest[1..]
                .find(q)
                .ok_or_else(|| self.err("unterminated string literal"))?;
            let s = rest[1..1 + end].to_string();
            self.pos += end + 2;
            return Ok(Value::String(s));
        }
        let end = rest.find([')', ' ']).unwrap_or(rest.len());
        let tok = &rest[..end];
        let v = match tok {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" => Value::Null,
            _ => {
                if let Ok(i) = tok.parse::<i64>() {
                    Value::from(i)
                } else if let Ok(f) = tok.parse::<f64>() {
                    Value::from(f)
                } else {
                    return Err(self.err("expected a literal"));
                }
            }
        };
        self.pos += end;
        Ok(v)
    }

    fn skip_ws(&mut self) {
        while self.peek() == Some(' ') {
            self.pos += 1;
        }
    }
}

/// Evaluate parsed steps against a value; results in document order.
pub fn eval<'a>(steps: &[Step], root: &'a Value) -> Vec<&'a Value> {
    let mut cur = vec![root];
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            apply(step, v, &mut next);
        }
        cur = next;
    }
    cur
}

fn apply<'a>(step: &Step, v: &'a Value, out: &mut Vec<&'a Value>) {
    match step {
        Step::Field(name) => {
            if let Some(c) = v.get(name.as_str()) {
                out.push(c);
            }
        }
        Step::Index(i) => {
            if let Some(a) = v.as_array() {
                let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                if idx >= 0
                    && let Some(c) = a.get(idx as usize)
                {
                    out.push(c);
                }
            }
        }
        Step::Wildcard => match v {
            Value::Array(a) => out.extend(a.iter()),
            Value::Object(o) => out.extend(o.values()),
            _ => {}
        },
        Step::Descend(name) => descend(v, name, out),
        Step::Filter(f) => match v {
            Value::Array(a) => out.extend(a.iter().filter(|e| matches(f, e))),
            other => {
                if matches(f, other) {
                    out.push(other)
                }
            }
        },
    }
}

fn descend<'a>(v: &'a Value, name: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(o) => {
            if let Some(c) = o.get(name) {
                out.push(c);
            }
            for c in o.values() {
                descend(c, name, out);
            }
        }
        Value::Array(a) => {
            for c in a {
                descend(c, name, out);
            }
        }
        _ => {}
    }
}

fn matches(f: &Filter, elem: &Value) -> bool {
    let found = eval(&f.path, elem);
    let Some((op, lit)) = &f.op else {
        return !found.is_empty();
    };
    found.iter().any(|v| compare(v, op, lit))
}

fn compare(v: &Value, op: &str, lit: &Value) -> bool {
    let ord = match (v, lit) {
        (Value::Number(a), Value::Number(b)) => a
            .as_f64()
            .zip(b.as_f64())
            .and_then(|(a, b)| a.partial_cmp(&b)),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        // jsonpath compares a number field with a quoted literal textually.
        (Value::Number(a), Value::String(b)) => Some(a.to_string().cmp(b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        (Value::Null, Value::Null) => Some(std::cmp::Ordering::Equal),
        _ => None,
    };
    use std::cmp::Ordering::*;
    match op {
        "==" => ord == Some(Equal),
        "!=" => ord != Some(Equal),
        "<" => ord == Some(Less),
        "<=" => matches!(ord, Some(Less | Equal)),
        ">" => ord == Some(Greater),
        ">=" => matches!(ord, Some(Greater | Equal)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn q<'a>(p: &str, v: &'a Value) -> Vec<&'a Value> {
        eval(&parse(p).expect("parses"), v)
    }

    #[test]
    fn fields_indices_wildcards_and_filters() {
        let obj = json!({
            "metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"containers": [{"name": "c1", "image": "i1"}, {"name": "c2", "image": "i2"}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "message": "ok"},
                {"type": "Reconciled", "status": "False", "message": "pending"}
            ], "replicas": 3}
        });
        assert_eq!(q(".metadata.name", &obj), vec![&json!("a")]);
        assert_eq!(q("$.metadata.name", &obj), vec![&json!("a")]);
        assert_eq!(q("{.metadata.name}", &obj), vec![&json!("a")]);
        assert_eq!(q(".spec.containers[0].image", &obj), vec![&json!("i1")]);
        assert_eq!(q(".spec.containers[-1].name", &obj), vec![&json!("c2")]);
        assert_eq!(
            q(".spec.containers[*].name", &obj),
            vec![&json!("c1"), &json!("c2")]
        );
        assert_eq!(
            q(
                r#".status.conditions[?(@.type=="Reconciled")].message"#,
                &obj
            ),
            vec![&json!("pending")]
        );
        assert_eq!(
            q(".status.conditions[?(@.type=='Ready')].status", &obj),
            vec![&json!("True")]
        );
        assert_eq!(
            q(".status.conditions[?(@.type != \"Ready\")].type", &obj),
            vec![&json!("Reconciled")]
        );
        assert_eq!(
            q(r".metadata.labels.app\.kubernetes\.io/name", &obj),
            vec![&json!("web")]
        );
        assert_eq!(
            q(".metadata.labels['app.kubernetes.io/name']", &obj),
            vec![&json!("web")]
        );
        assert_eq!(q("..image", &obj), vec![&json!("i1"), &json!("i2")]);
        assert_eq!(q(".status.replicas", &obj), vec![&json!(3)]);
        assert!(q(".status.missing", &obj).is_empty());
        assert_eq!(
            q(".status.conditions[?(@.message)].type", &obj).len(),
            2,
            "existence filter keeps elements that have the field"
        );
    }

    #[test]
    fn numeric_filters() {
        let v = json!({"items": [{"n": 1}, {"n": 5}, {"n": 10}]});
        assert_eq!(q(".items[?(@.n > 4)].n", &v), vec![&json!(5), &json!(10)]);
        assert_eq!(q(".items[?(@.n <= 5)].n", &v), vec![&json!(1), &json!(5)]);
    }

    #[test]
    fn parse_errors() {
        for bad in [
            "",
            "metadata.name",
            ".a[",
            ".a[x]",
            ".a[?(@.b==)]",
            ".a[?(b==1)]",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should not parse");
        }
    }
}
