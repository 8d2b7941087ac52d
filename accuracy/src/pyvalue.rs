//! Python values as `function_call_extractor` sees them: what `json.loads` and
//! `ast.literal_eval` produce, printed back as `json.dumps` (default settings) prints them.

use loadgen_py::json::{Encode, Encoder, Escape};

/// A value after `json.loads` or `ast.literal_eval`. Strings are UTF-16 units because
/// `json.loads` keeps lone surrogates (`"\ud800"`) and `json.dumps` escapes them back.
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue {
    None,
    Bool(bool),
    /// An integer's decimal digits (arbitrary size, as Python's `int`).
    Int(String),
    Float(f64),
    Str(Vec<u16>),
    List(Vec<PyValue>),
    /// Insertion order; a repeated key keeps its first place and takes the last value.
    Dict(Vec<(PyValue, PyValue)>),
}

impl PyValue {
    pub fn str(text: &str) -> PyValue {
        PyValue::Str(text.encode_utf16().collect())
    }

    /// Python truthiness (`if value:`, `value or default`).
    pub fn is_truthy(&self) -> bool {
        match self {
            PyValue::None => false,
            PyValue::Bool(b) => *b,
            PyValue::Int(d) => d != "0",
            PyValue::Float(f) => *f != 0.0,
            PyValue::Str(u) => !u.is_empty(),
            PyValue::List(l) => !l.is_empty(),
            PyValue::Dict(d) => !d.is_empty(),
        }
    }

    /// Python dict-key equality: `1 == 1.0 == True`, strings by content.
    fn key_eq(&self, other: &PyValue) -> bool {
        match (self.as_number(), other.as_number()) {
            (Some(a), Some(b)) => a == b,
            _ => self == other,
        }
    }

    fn as_number(&self) -> Option<f64> {
        match self {
            PyValue::Bool(b) => Some(f64::from(u8::from(*b))),
            PyValue::Int(digits) => digits.parse::<f64>().ok(),
            PyValue::Float(f) => Some(*f),
            _ => None,
        }
    }
}

/// Inserts as a Python dict does.
pub fn dict_insert(entries: &mut Vec<(PyValue, PyValue)>, key: PyValue, value: PyValue) {
    match entries.iter_mut().find(|(k, _)| k.key_eq(&key)) {
        Some(slot) => slot.1 = value,
        None => entries.push((key, value)),
    }
}

impl Encode for PyValue {
    fn encode(&self, encoder: &mut Encoder<'_>) {
        match self {
            PyValue::None => encoder.null(),
            PyValue::Bool(b) => encoder.bool(*b),
            PyValue::Int(digits) => encoder.number(digits),
            PyValue::Float(f) => encoder.float(*f),
            PyValue::Str(units) => encoder.str_utf16(units.iter().copied()),
            PyValue::List(items) => encoder.list(items),
            PyValue::Dict(entries) => encoder.dict(entries.iter().map(|(k, v)| (k, v))),
        }
    }
}

/// `json.dumps(value)` with default settings (`ensure_ascii`, `", "` and `": "`).
pub fn dump(value: &PyValue, out: &mut String) {
    value.encode(&mut Encoder::new(out, Escape::Ascii));
}

/// `json.loads` (strict): `NaN`/`Infinity` accepted, lone surrogates kept, trailing data and
/// raw control characters in strings refused. `None` where Python raises.
pub fn json_loads(text: &str) -> Option<PyValue> {
    let mut p = Json { s: text.as_bytes(), i: 0, depth: 0 };
    p.ws();
    let v = p.value()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct Json<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl Json<'_> {
    fn ws(&mut self) {
        while matches!(self.s.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        let ok = self.s[self.i..].starts_with(lit.as_bytes());
        if ok {
            self.i += lit.len();
        }
        ok
    }

    fn value(&mut self) -> Option<PyValue> {
        // Python's decoder recurses; past ~1000 levels it raises RecursionError.
        if self.depth > 900 {
            return None;
        }
        match *self.s.get(self.i)? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string().map(PyValue::Str),
            b'n' if self.eat("null") => Some(PyValue::None),
            b't' if self.eat("true") => Some(PyValue::Bool(true)),
            b'f' if self.eat("false") => Some(PyValue::Bool(false)),
            b'N' if self.eat("NaN") => Some(PyValue::Float(f64::NAN)),
            b'I' if self.eat("Infinity") => Some(PyValue::Float(f64::INFINITY)),
            b'-' if self.eat("-Infinity") => Some(PyValue::Float(f64::NEG_INFINITY)),
            _ => self.number(),
        }
    }

    fn object(&mut self) -> Option<PyValue> {
        self.i += 1;
        self.depth += 1;
        let mut entries = Vec::new();
        self.ws();
        if self.eat("}") {
            self.depth -= 1;
            return Some(PyValue::Dict(entries));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return None;
            }
            let key = PyValue::Str(self.string()?);
            self.ws();
            if !self.eat(":") {
                return None;
            }
            self.ws();
            let value = self.value()?;
            dict_insert(&mut entries, key, value);
            self.ws();
            if self.eat("}") {
                self.depth -= 1;
                return Some(PyValue::Dict(entries));
            }
            if !self.eat(",") {
                return None;
            }
        }
    }

    fn array(&mut self) -> Option<PyValue> {
        self.i += 1;
        self.depth += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            self.depth -= 1;
            return Some(PyValue::List(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            if self.eat("]") {
                self.depth -= 1;
                return Some(PyValue::List(items));
            }
            if !self.eat(",") {
                return None;
            }
        }
    }

    fn hex4(&mut self) -> Option<u16> {
        let digits = std::str::from_utf8(self.s.get(self.i..self.i + 4)?).ok()?;
        // Python's decoder takes exactly four hex digits (no sign, no `_`).
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.i += 4;
        u16::from_str_radix(digits, 16).ok()
    }

    fn string(&mut self) -> Option<Vec<u16>> {
        self.i += 1;
        let mut units = Vec::new();
        loop {
            let rest = std::str::from_utf8(&self.s[self.i..]).ok()?;
            let c = rest.chars().next()?;
            self.i += c.len_utf8();
            match c {
                '"' => return Some(units),
                '\u{0}'..='\u{1f}' => return None,
                '\\' => {
                    let e = *self.s.get(self.i)?;
                    self.i += 1;
                    let unit = match e {
                        b'"' => 0x22,
                        b'\\' => 0x5c,
                        b'/' => 0x2f,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => 0x0a,
                        b'r' => 0x0d,
                        b't' => 0x09,
                        b'u' => self.hex4()?,
                        _ => return None,
                    };
                    units.push(unit);
                }
                c => units.extend(c.encode_utf16(&mut [0; 2]).iter()),
            }
        }
    }

    fn number(&mut self) -> Option<PyValue> {
        let start = self.i;
        self.eat("-");
        let int_start = self.i;
        match self.s.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return None,
        }
        let mut is_float = false;
        if self.s.get(self.i) == Some(&b'.')
            && self.s.get(self.i + 1).is_some_and(u8::is_ascii_digit)
        {
            self.i += 1;
            self.digits();
            is_float = true;
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            let save = self.i;
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.digits();
                is_float = true;
            } else {
                self.i = save;
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        if is_float {
            return text.parse::<f64>().ok().map(PyValue::Float);
        }
        let digits = std::str::from_utf8(&self.s[int_start..self.i]).ok()?;
        let negative = start != int_start && digits != "0";
        Some(PyValue::Int(if negative { format!("-{digits}") } else { digits.to_string() }))
    }

    fn digits(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
    }
}
