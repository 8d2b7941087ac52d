//! The call arguments `function_call_extractor` reads from text such as
//! `get_weather(city='London', days=3)`: the reference parses `dict(<args>)` with Python's
//! `ast` and `literal_eval`s each keyword. This reads the literal subset exactly (strings,
//! numbers, `True`/`False`/`None`, lists, tuples, dicts, dotted names) and says which
//! construct it cannot read rather than guess at `ast.unparse`.

use super::pyvalue::{dict_insert, PyValue};

/// What reading an argument list gives.
#[derive(Debug, PartialEq)]
pub enum Args {
    /// The keyword arguments, in order (Python's `SyntaxError` cases give `{"_raw": ..}`).
    Keywords(Vec<(PyValue, PyValue)>),
    /// A construct outside the subset, named.
    Unsupported(String),
}

enum Fail {
    Syntax,
    Unsupported(String),
}

type R<T> = Result<T, Fail>;

fn unsupported<T>(what: impl Into<String>) -> R<T> {
    Err(Fail::Unsupported(what.into()))
}

/// An expression: a literal, or a (dotted) name, which `literal_eval` refuses and
/// `ast.unparse` prints back as written.
enum Expr {
    Lit(PyValue),
    Name(String),
}

const PY_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Reads `args` as the reference's `_parse_arguments_string` does.
pub fn parse_arguments(args: &str) -> Args {
    let mut p = P { c: args.chars().collect(), i: 0 };
    match p.arguments() {
        Ok(kw) => Args::Keywords(kw),
        Err(Fail::Syntax) => Args::Keywords(vec![(PyValue::str("_raw"), PyValue::str(args))]),
        Err(Fail::Unsupported(what)) => Args::Unsupported(what),
    }
}

struct P {
    c: Vec<char>,
    i: usize,
}

impl P {
    fn peek(&self) -> Option<char> {
        self.c.get(self.i).copied()
    }

    fn ws(&mut self) -> R<()> {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\n' | '\r' | '\x0c') => self.i += 1,
                Some('\\') if self.c.get(self.i + 1) == Some(&'\n') => self.i += 2,
                Some('#') => return unsupported("a comment"),
                _ => return Ok(()),
            }
        }
    }

    fn arguments(&mut self) -> R<Vec<(PyValue, PyValue)>> {
        let mut keywords = Vec::new();
        let (mut seen_keyword, mut seen_double_star) = (false, false);
        self.ws()?;
        while self.peek().is_some() {
            if self.starts("**") {
                self.i += 2;
                self.expr()?;
                seen_double_star = true;
            } else if self.peek() == Some('*') {
                self.i += 1;
                self.positional()?;
                if seen_double_star {
                    return Err(Fail::Syntax);
                }
            } else if let Some(name) = self.keyword_name()? {
                // A repeated keyword parses (the compiler, not the parser, refuses it): the
                // reference's dict keeps the first place and the last value.
                let value = match self.expr()? {
                    Expr::Lit(v) => v,
                    Expr::Name(n) => PyValue::str(&n),
                };
                dict_insert(&mut keywords, PyValue::str(&name), value);
                seen_keyword = true;
            } else {
                self.positional()?;
                if seen_keyword || seen_double_star {
                    return Err(Fail::Syntax);
                }
            }
            self.ws()?;
            match self.peek() {
                None => break,
                Some(',') => self.i += 1,
                Some(c) => return unsupported(format!("the expression at {c:?}")),
            }
            self.ws()?;
        }
        Ok(keywords)
    }

    /// A positional argument: the reference drops its value, so one outside the literal subset
    /// (a nested call, an operator) is skipped to the next top-level comma, taken as valid.
    fn positional(&mut self) -> R<()> {
        let start = self.i;
        match self.expr() {
            Err(Fail::Unsupported(_)) => {}
            other => return other.map(|_| ()),
        }
        self.i = start;
        let (mut depth, mut quote) = (0usize, None::<char>);
        while let Some(c) = self.peek() {
            match (quote, c) {
                (Some(_), '\\') => self.i += 1,
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '(' | '[' | '{') => depth += 1,
                (None, ')' | ']' | '}') => depth = depth.checked_sub(1).ok_or(Fail::Syntax)?,
                (None, ',') if depth == 0 => break,
                (None, '#') => return unsupported("a comment"),
                _ => {}
            }
            self.i += 1;
        }
        if quote.is_some() || depth != 0 {
            return Err(Fail::Syntax);
        }
        Ok(())
    }

    fn starts(&self, s: &str) -> bool {
        s.chars().enumerate().all(|(k, ch)| self.c.get(self.i + k) == Some(&ch))
    }

    /// `NAME =` (not `==`) at the cursor: consumes it and returns the name.
    fn keyword_name(&mut self) -> R<Option<String>> {
        let start = self.i;
        let Some(name) = self.identifier() else { return Ok(None) };
        self.ws()?;
        if self.peek() == Some('=') && self.c.get(self.i + 1) != Some(&'=') {
            self.i += 1;
            if PY_KEYWORDS.contains(&name.as_str()) {
                return Err(Fail::Syntax);
            }
            self.ws()?;
            return Ok(Some(name));
        }
        self.i = start;
        Ok(None)
    }

    fn identifier(&mut self) -> Option<String> {
        let start = self.i;
        if !self.peek().is_some_and(|c| c == '_' || c.is_ascii_alphabetic()) {
            return None;
        }
        while self.peek().is_some_and(|c| c == '_' || c.is_ascii_alphanumeric()) {
            self.i += 1;
        }
        if self.peek().is_some_and(|c| !c.is_ascii()) {
            self.i = start;
            return None;
        }
        Some(self.c[start..self.i].iter().collect())
    }

    /// One expression; anything after it other than a separator is an operator or a call.
    fn expr(&mut self) -> R<Expr> {
        self.ws()?;
        let e = self.atom()?;
        self.ws()?;
        match self.peek() {
            None | Some(',' | ')' | ']' | '}' | ':') => Ok(e),
            Some(c) => unsupported(format!("the operator or call at {c:?}")),
        }
    }

    fn lit(&mut self) -> R<PyValue> {
        match self.expr()? {
            Expr::Lit(v) => Ok(v),
            Expr::Name(n) => unsupported(format!("the name {n:?} inside a literal")),
        }
    }

    fn atom(&mut self) -> R<Expr> {
        let Some(c) = self.peek() else { return Err(Fail::Syntax) };
        match c {
            '[' => self.list().map(Expr::Lit),
            '(' => self.tuple().map(Expr::Lit),
            '{' => self.dict().map(Expr::Lit),
            '\'' | '"' => self.strings().map(Expr::Lit),
            '-' | '+' => {
                self.i += 1;
                self.ws()?;
                if !self.peek().is_some_and(|d| d.is_ascii_digit() || d == '.') {
                    return unsupported(format!("the unary {c:?}"));
                }
                let v = self.number()?;
                Ok(Expr::Lit(if c == '-' { negate(v) } else { v }))
            }
            d if d.is_ascii_digit() || d == '.' => self.number().map(Expr::Lit),
            _ => self.name_or_constant(),
        }
    }

    fn name_or_constant(&mut self) -> R<Expr> {
        let Some(name) = self.identifier() else {
            return unsupported(format!("the text at {:?}", self.peek().unwrap_or(' ')));
        };
        if matches!(self.peek(), Some('\'' | '"')) {
            return unsupported(format!("the string prefix {name:?}"));
        }
        match name.as_str() {
            "True" => return Ok(Expr::Lit(PyValue::Bool(true))),
            "False" => return Ok(Expr::Lit(PyValue::Bool(false))),
            "None" => return Ok(Expr::Lit(PyValue::None)),
            n if PY_KEYWORDS.contains(&n) => return unsupported(format!("the keyword {n:?}")),
            _ => {}
        }
        let mut dotted = name;
        loop {
            let save = self.i;
            self.ws()?;
            if self.peek() != Some('.') {
                self.i = save;
                return Ok(Expr::Name(dotted));
            }
            self.i += 1;
            self.ws()?;
            let Some(part) = self.identifier() else { return Err(Fail::Syntax) };
            dotted = format!("{dotted}.{part}");
        }
    }

    /// Items up to `close`, separated by commas, a trailing comma allowed.
    fn items(&mut self, close: char) -> R<(Vec<PyValue>, bool)> {
        self.i += 1;
        let (mut items, mut comma) = (Vec::new(), false);
        loop {
            self.ws()?;
            if self.peek() == Some(close) {
                self.i += 1;
                return Ok((items, comma));
            }
            items.push(self.lit()?);
            match self.peek() {
                Some(',') => {
                    self.i += 1;
                    comma = true;
                }
                Some(c) if c == close => {}
                _ => return Err(Fail::Syntax),
            }
        }
    }

    fn list(&mut self) -> R<PyValue> {
        Ok(PyValue::List(self.items(']')?.0))
    }

    /// `(x)` is `x`; `()`, `(x,)` and `(x, y)` are tuples, which `json.dumps` writes as lists.
    fn tuple(&mut self) -> R<PyValue> {
        let (mut items, comma) = self.items(')')?;
        if items.len() == 1 && !comma {
            return Ok(items.remove(0));
        }
        Ok(PyValue::List(items))
    }

    fn dict(&mut self) -> R<PyValue> {
        self.i += 1;
        let mut entries = Vec::new();
        loop {
            self.ws()?;
            if self.peek() == Some('}') {
                self.i += 1;
                return Ok(PyValue::Dict(entries));
            }
            let key = self.lit()?;
            if matches!(key, PyValue::List(_) | PyValue::Dict(_)) {
                return unsupported("a list, tuple or dict as a dict key");
            }
            match self.peek() {
                Some(':') => self.i += 1,
                Some(',' | '}') => return unsupported("a set (json.dumps cannot write one)"),
                _ => return Err(Fail::Syntax),
            }
            let value = self.lit()?;
            dict_insert(&mut entries, key, value);
            match self.peek() {
                Some(',') => self.i += 1,
                Some('}') => {}
                _ => return Err(Fail::Syntax),
            }
        }
    }
}

fn negate(v: PyValue) -> PyValue {
    match v {
        PyValue::Int(d) if d == "0" => PyValue::Int(d),
        PyValue::Int(d) => PyValue::Int(format!("-{d}")),
        PyValue::Float(f) => PyValue::Float(-f),
        other => other,
    }
}

impl P {
    fn number(&mut self) -> R<PyValue> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_')) {
            // An exponent's sign belongs to the number: `1e-5`.
            let c = self.c[self.i];
            self.i += 1;
            let is_exp = matches!(c, 'e' | 'E') && !self.c[start..self.i].starts_with(&['0', 'x']);
            if is_exp && matches!(self.peek(), Some('+' | '-')) {
                self.i += 1;
            }
        }
        let text: String = self.c[start..self.i].iter().filter(|&&c| c != '_').collect();
        let lower = text.to_ascii_lowercase();
        let radix =
            [("0x", 16), ("0o", 8), ("0b", 2)].into_iter().find(|(p, _)| lower.starts_with(p));
        if let Some((prefix, radix)) = radix {
            let value =
                i128::from_str_radix(&lower[prefix.len()..], radix).map_err(|_| Fail::Syntax)?;
            return Ok(PyValue::Int(value.to_string()));
        }
        if lower.ends_with('j') {
            return unsupported("a complex number (json.dumps cannot write one)");
        }
        if lower.bytes().all(|b| b.is_ascii_digit()) {
            let trimmed = lower.trim_start_matches('0');
            if trimmed.is_empty() {
                return Ok(PyValue::Int("0".to_string()));
            }
            if trimmed.len() != lower.len() {
                return Err(Fail::Syntax);
            }
            return Ok(PyValue::Int(lower));
        }
        lower.parse::<f64>().map(PyValue::Float).map_err(|_| Fail::Syntax)
    }

    /// Adjacent string literals, concatenated as Python does.
    fn strings(&mut self) -> R<PyValue> {
        let mut out = String::new();
        loop {
            out.push_str(&self.string()?);
            let save = self.i;
            self.ws()?;
            if !matches!(self.peek(), Some('\'' | '"')) {
                self.i = save;
                return Ok(PyValue::str(&out));
            }
        }
    }

    fn string(&mut self) -> R<String> {
        let quote = self.c[self.i];
        if self.c.get(self.i + 1) == Some(&quote) && self.c.get(self.i + 2) == Some(&quote) {
            return unsupported("a triple-quoted string");
        }
        self.i += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else { return Err(Fail::Syntax) };
            self.i += 1;
            match c {
                '\n' => return Err(Fail::Syntax),
                c if c == quote => return Ok(out),
                '\\' => self.escape(&mut out)?,
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> R<()> {
        let Some(e) = self.peek() else { return Err(Fail::Syntax) };
        self.i += 1;
        let simple = match e {
            '\n' => Some(None),
            '\\' | '\'' | '"' => Some(Some(e)),
            'a' => Some(Some('\x07')),
            'b' => Some(Some('\x08')),
            'f' => Some(Some('\x0c')),
            'n' => Some(Some('\n')),
            'r' => Some(Some('\r')),
            't' => Some(Some('\t')),
            'v' => Some(Some('\x0b')),
            _ => None,
        };
        if let Some(ch) = simple {
            out.extend(ch);
            return Ok(());
        }
        let code = match e {
            '0'..='7' => {
                let mut digits = e.to_string();
                while digits.len() < 3 && self.peek().is_some_and(|d| ('0'..='7').contains(&d)) {
                    digits.push(self.c[self.i]);
                    self.i += 1;
                }
                u32::from_str_radix(&digits, 8).ok()
            }
            'x' => self.hex(2)?,
            'u' => self.hex(4)?,
            'U' => self.hex(8)?,
            'N' => return unsupported("a \\N{...} escape"),
            other => {
                out.push('\\');
                out.push(other);
                return Ok(());
            }
        };
        match code.and_then(char::from_u32) {
            Some(ch) => out.push(ch),
            None => return unsupported("an escape that is a lone surrogate"),
        }
        Ok(())
    }

    fn hex(&mut self, n: usize) -> R<Option<u32>> {
        let digits: String = self.c.get(self.i..self.i + n).ok_or(Fail::Syntax)?.iter().collect();
        if !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(Fail::Syntax);
        }
        self.i += n;
        let code = u32::from_str_radix(&digits, 16).map_err(|_| Fail::Syntax)?;
        if code > 0x10_ffff {
            return Err(Fail::Syntax);
        }
        Ok(Some(code))
    }
}
