//! Kubernetes resource quantities ("80Gi", "1.5", "100m", "2e3") as exact values, parsed the
//! way apimachinery's `resource.ParseQuantity` parses them and compared the way the DRA CEL
//! library compares them.
//!
//! The facts followed (apimachinery `pkg/api/resource/quantity.go`):
//! - `<sign>? <digits>? (. <digits>?)? <suffix>`, where the suffix is a binary SI one (`Ki` …
//!   `Ei`), a decimal SI one (`n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal
//!   exponent (`e3`, `E-2`, `e+6`); no whitespace anywhere.
//! - A decimal exponent is read as a 64-bit integer and then kept in 32 bits, as apimachinery
//!   does (`1e4294967296` is 1); one that is not a 64-bit integer is refused.
//! - Decimal values have no upper bound: `1e99` is exactly 10⁹⁹.
//! - Binary-SI values are capped at 2⁶³−1 in magnitude (`9Ei` and `9223372036854775807Ki`
//!   are 9223372036854775807).
//! - Values finer than a nano-unit (10⁻⁹) are rounded away from zero to the next nano-unit, so
//!   a non-zero request never becomes zero (`0.1n` is `1n`, `-3.001n` is `-4n`).
//!
//! One deliberate difference: apimachinery's scanner takes a number without any digit as 0
//! (`.`, `-`, `Gi`, `m`, `e3` all parse to zero there), against its own documented grammar;
//! here a quantity needs at least one digit, so those are refused as junk.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// The finest unit a quantity keeps is 10^NANO_EXPONENT.
const NANO_EXPONENT: i64 = -9;

/// Binary-SI quantities are capped at this magnitude (2⁶³−1), as apimachinery caps them.
const MAX_BINARY_SI: &str = "9223372036854775807";

/// `add` and `sub` refuse results that would need more digits than this (e.g. `1e2000000000`
/// plus `1n`): the exact sum would not fit in memory.
const MAX_DIGITS: i64 = 1 << 16;

/// A resource quantity with its exact value and the text it was written as.
///
/// Representation: an arbitrary-length decimal, the significant digits of the magnitude plus a
/// power of ten (`digits × 10^exponent`) and a sign. It is normalised (no leading or trailing
/// zero digits; zero has no digits, exponent 0 and no sign), so equal values have equal
/// representations and comparison is exact for every value the grammar can write: `1e99`,
/// `-1e99`, 40-digit integers and nano-units all order correctly against each other, with no
/// saturation and no overflow. A fixed-width integer of nano-units (i128) would have covered
/// only up to about 10²⁹ and refused `1e99`, which apimachinery accepts; saturating with a flag
/// would have made distinct huge values compare equal. The cost is a heap allocation per value
/// and arithmetic proportional to the digits, which quantities have few of.
#[derive(Clone)]
pub struct Quantity {
    negative: bool,
    /// Significant digits (each 0–9) of the magnitude, most significant first.
    digits: Vec<u8>,
    /// The power of ten the digits are multiplied by; at least −9 for a parsed value.
    exponent: i64,
    /// The text it was parsed from, or a canonical form for computed values.
    text: String,
}

impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Quantity({:?})", self.text)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        (self.negative, &self.digits, self.exponent) == (other.negative, &other.digits, other.exponent)
    }
}
impl Eq for Quantity {}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.negative, &self.digits, self.exponent).hash(state);
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match self.sign().cmp(&other.sign()) {
            Ordering::Equal if self.negative => magnitude_cmp(other, self),
            Ordering::Equal => magnitude_cmp(self, other),
            unequal => unequal,
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Quantity {
    type Err = String;
    fn from_str(s: &str) -> Result<Quantity, String> {
        Quantity::parse(s)
    }
}

/// What a suffix multiplies the number by.
enum Scale {
    /// 10^n: decimal SI and decimal exponents.
    Ten(i64),
    /// 2^n: binary SI, capped at 2⁶³−1.
    Two(u32),
}

fn suffix_scale(suffix: &str) -> Option<Scale> {
    Some(match suffix {
        "n" => Scale::Ten(-9),
        "u" => Scale::Ten(-6),
        "m" => Scale::Ten(-3),
        "" => Scale::Ten(0),
        "k" => Scale::Ten(3),
        "M" => Scale::Ten(6),
        "G" => Scale::Ten(9),
        "T" => Scale::Ten(12),
        "P" => Scale::Ten(15),
        "E" => Scale::Ten(18),
        "Ki" => Scale::Two(10),
        "Mi" => Scale::Two(20),
        "Gi" => Scale::Two(30),
        "Ti" => Scale::Two(40),
        "Pi" => Scale::Two(50),
        "Ei" => Scale::Two(60),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E']).filter(|e| !e.is_empty())?;
            // Only an optional sign and ASCII digits, as Go's ParseInt in base 10 takes.
            let unsigned = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let wide: i64 = exponent.parse().ok()?;
            // apimachinery keeps the exponent as an int32: the conversion truncates.
            Scale::Ten(i64::from(wide as i32))
        }
    })
}

impl Quantity {
    /// Parses a quantity as apimachinery's `ParseQuantity` does (see the module's notes).
    pub fn parse(text: &str) -> Result<Quantity, String> {
        let bad = || format!("{text:?} is not a quantity");
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let whole_end = unsigned.find(|c: char| !c.is_ascii_digit()).unwrap_or(unsigned.len());
        let (whole, rest) = unsigned.split_at(whole_end);
        let (fraction, suffix) = match rest.strip_prefix('.') {
            Some(after) => after.split_at(after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len())),
            None => ("", rest),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(bad());
        }
        let scale = suffix_scale(suffix).ok_or_else(bad)?;
        let mut digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).map(|b| b - b'0').collect();
        let mut exponent = -(fraction.len() as i64);
        let binary = match scale {
            Scale::Ten(e) => {
                exponent += e;
                false
            }
            Scale::Two(bits) => {
                for _ in 0..bits {
                    double(&mut digits);
                }
                true
            }
        };
        let mut q = Quantity { negative, digits, exponent, text: text.to_string() };
        q.normalize();
        q.round_up_to_nano();
        if binary && magnitude_cmp(&q, &Quantity::max_binary_si()) == Ordering::Greater {
            let max = Quantity::max_binary_si();
            q.digits = max.digits;
            q.exponent = max.exponent;
        }
        Ok(q)
    }

    fn max_binary_si() -> Quantity {
        let mut max = Quantity {
            negative: false,
            digits: MAX_BINARY_SI.bytes().map(|b| b - b'0').collect(),
            exponent: 0,
            text: MAX_BINARY_SI.to_string(),
        };
        max.normalize();
        max
    }

    pub fn from_int(v: i64) -> Quantity {
        Quantity::computed(v < 0, v.unsigned_abs().to_string().bytes().map(|b| b - b'0').collect(), 0)
    }

    /// A value computed here (not parsed), with a canonical text: a plain integer, nano-units
    /// (`1500000000n`) for fractions, or a decimal exponent (`12e99`) for very large values;
    /// each parses back to the same value.
    fn computed(negative: bool, digits: Vec<u8>, exponent: i64) -> Quantity {
        let mut q = Quantity { negative, digits, exponent, text: String::new() };
        q.normalize();
        let mut text = String::from(if q.negative { "-" } else { "" });
        text.extend(q.digits.iter().map(|d| char::from(b'0' + d)));
        if q.digits.is_empty() {
            text = "0".into();
        } else if q.exponent < 0 {
            text.extend(std::iter::repeat_n('0', (q.exponent - NANO_EXPONENT).max(0) as usize));
            text.push('n');
        } else if q.exponent <= 40 {
            text.extend(std::iter::repeat_n('0', q.exponent as usize));
        } else {
            text.push_str(&format!("e{}", q.exponent));
        }
        q.text = text;
        q
    }

    /// Strips leading and trailing zero digits (moving the latter into the exponent).
    fn normalize(&mut self) {
        let leading = self.digits.iter().take_while(|d| **d == 0).count();
        self.digits.drain(..leading);
        let trailing = self.digits.iter().rev().take_while(|d| **d == 0).count();
        self.digits.truncate(self.digits.len() - trailing);
        self.exponent += trailing as i64;
        if self.digits.is_empty() {
            self.negative = false;
            self.exponent = 0;
        }
    }

    /// Rounds a magnitude finer than a nano-unit up to the next nano-unit.
    fn round_up_to_nano(&mut self) {
        if self.exponent >= NANO_EXPONENT {
            return;
        }
        // Normalised, so the dropped digits end in a non-zero one: always round up.
        let drop = (NANO_EXPONENT - self.exponent) as usize;
        self.digits.truncate(self.digits.len().saturating_sub(drop));
        self.exponent = NANO_EXPONENT;
        increment(&mut self.digits);
        self.normalize();
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i64 {
        match (self.digits.is_empty(), self.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    /// The exact value when it is an integer that fits in an i128.
    pub fn to_i128(&self) -> Option<i128> {
        if self.exponent < 0 || self.digits.len() as i64 + self.exponent > 38 {
            return None;
        }
        let mut v: i128 = 0;
        for d in &self.digits {
            v = v * 10 + i128::from(*d);
        }
        v = v.checked_mul(10i128.checked_pow(self.exponent as u32)?)?;
        Some(if self.negative { -v } else { v })
    }

    /// An integer that fits in an i64 (what CEL's `isInteger()` asks).
    pub fn is_integer(&self) -> bool {
        self.as_integer().is_ok()
    }

    pub fn as_integer(&self) -> Result<i64, String> {
        if self.exponent < 0 {
            return Err(format!("cannot convert value to integer: {self} has a fraction"));
        }
        self.to_i128()
            .and_then(|v| i64::try_from(v).ok())
            .ok_or_else(|| format!("cannot convert value to integer: {self} is too large"))
    }

    /// The nearest f64 (infinite beyond its range).
    pub fn as_float(&self) -> f64 {
        if self.digits.is_empty() {
            return 0.0;
        }
        let digits: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        let sign = if self.negative { "-" } else { "" };
        format!("{sign}{digits}e{}", self.exponent).parse().unwrap_or(f64::NAN)
    }

    pub fn add(&self, other: &Quantity) -> Result<Quantity, String> {
        let exponent = self.exponent.min(other.exponent);
        let top = (self.digits.len() as i64 + self.exponent).max(other.digits.len() as i64 + other.exponent);
        if top - exponent > MAX_DIGITS {
            return Err("quantity overflow".into());
        }
        let a = self.aligned(exponent);
        let b = other.aligned(exponent);
        if self.negative == other.negative {
            return Ok(Quantity::computed(self.negative, sum(&a, &b), exponent));
        }
        match magnitude_cmp(self, other) {
            Ordering::Equal => Ok(Quantity::from_int(0)),
            Ordering::Greater => Ok(Quantity::computed(self.negative, difference(&a, &b), exponent)),
            Ordering::Less => Ok(Quantity::computed(other.negative, difference(&b, &a), exponent)),
        }
    }

    pub fn sub(&self, other: &Quantity) -> Result<Quantity, String> {
        let mut negated = other.clone();
        negated.negative = !other.negative && !other.digits.is_empty();
        self.add(&negated)
    }

    /// The digits, least significant first, scaled to `exponent` (at most self's).
    fn aligned(&self, exponent: i64) -> Vec<u8> {
        let zeros = (self.exponent - exponent) as usize;
        std::iter::repeat_n(0, zeros).chain(self.digits.iter().rev().copied()).collect()
    }

    /// The exact value in plain decimal notation, for tests.
    #[cfg(test)]
    fn plain(&self) -> String {
        let mut s: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        if s.is_empty() {
            return "0".into();
        }
        if self.exponent >= 0 {
            s.extend(std::iter::repeat_n('0', self.exponent as usize));
        } else {
            let point = self.exponent.unsigned_abs() as usize;
            if s.len() <= point {
                s = "0".repeat(point - s.len() + 1) + &s;
            }
            s.insert(s.len() - point, '.');
        }
        if self.negative { format!("-{s}") } else { s }
    }
}

/// Compares magnitudes (ignoring signs) of two normalised values.
fn magnitude_cmp(a: &Quantity, b: &Quantity) -> Ordering {
    match (a.digits.is_empty(), b.digits.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (false, false) => {}
    }
    // The position of the leading digit decides; then the digits do, a missing digit being 0
    // (normalised digits end in a non-zero one, so slice order is numeric order).
    let top = |q: &Quantity| q.digits.len() as i128 + i128::from(q.exponent);
    top(a).cmp(&top(b)).then_with(|| a.digits.cmp(&b.digits))
}

/// Doubles a most-significant-first digit string in place.
fn double(digits: &mut Vec<u8>) {
    let mut carry = 0;
    for d in digits.iter_mut().rev() {
        let v = *d * 2 + carry;
        *d = v % 10;
        carry = v / 10;
    }
    if carry > 0 {
        digits.insert(0, carry);
    }
}

/// Adds one to a most-significant-first digit string in place.
fn increment(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d < 9 {
            *d += 1;
            return;
        }
        *d = 0;
    }
    digits.insert(0, 1);
}

/// a + b of least-significant-first digits, as most-significant-first digits.
fn sum(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0;
    for i in 0..a.len().max(b.len()) {
        let v = a.get(i).unwrap_or(&0) + b.get(i).unwrap_or(&0) + carry;
        out.push(v % 10);
        carry = v / 10;
    }
    if carry > 0 {
        out.push(carry);
    }
    out.reverse();
    out
}

/// a − b (a ≥ b) of least-significant-first digits, as most-significant-first digits.
fn difference(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0;
    for (i, x) in a.iter().enumerate() {
        let y = b.get(i).unwrap_or(&0) + borrow;
        if *x >= y {
            out.push(x - y);
            borrow = 0;
        } else {
            out.push(x + 10 - y);
            borrow = 1;
        }
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::Quantity;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    /// Inputs and the exact values apimachinery v0.37.2's `ParseQuantity(s).AsDec()` gives.
    #[rstest]
    #[case::zero("0", "0")]
    #[case::negative_zero("-0", "0")]
    #[case::plain("9", "9")]
    #[case::plus("+5", "5")]
    #[case::leading_zeros("00012", "12")]
    #[case::kibi("1Ki", "1024")]
    #[case::tebi("1Ti", "1099511627776")]
    #[case::exbi("7Ei", "8070450532247928832")]
    #[case::fractional_gibi("1.5Gi", "1610612736")]
    #[case::fractional_kibi("100.035Ki", "102435.84")]
    #[case::tenth_kibi("0.1Ki", "102.4")]
    #[case::just_under_the_cap("7.999Ei", "9222219115350168961.024")]
    #[case::exbi_capped("9Ei", "9223372036854775807")]
    #[case::eight_exbi_capped("8Ei", "9223372036854775807")]
    #[case::kibi_capped("9223372036854775807Ki", "9223372036854775807")]
    #[case::pebi_capped("8192Pi", "9223372036854775807")]
    #[case::largest_uncapped_kibi("9007199254740991Ki", "9223372036854774784")]
    #[case::negative_capped("-9Ei", "-9223372036854775807")]
    #[case::milli("100m", "0.1")]
    #[case::micro("0.5m", "0.0005")]
    #[case::nano("1n", "0.000000001")]
    #[case::kilo("8k", "8000")]
    #[case::exa("12E", "12000000000000000000")]
    #[case::decimal_not_capped("9223372036854775808", "9223372036854775808")]
    #[case::beyond_i128("99999999999999999999999999999999999999999", "99999999999999999999999999999999999999999")]
    #[case::exponent("1e3", "1000")]
    #[case::exponent_upper_plus("1E+3", "1000")]
    #[case::exponent_negative("1e-3", "0.001")]
    #[case::fraction_exponent("1.2e3", "1200")]
    #[case::exponent_e99(
        "1e99",
        "1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    )]
    #[case::exponent_plus_e99(
        "1e+99",
        "1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    )]
    #[case::negative_e99(
        "-1e99",
        "-1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    )]
    #[case::zero_e99("0e99", "0")]
    #[case::many_digits_small_exponent("10000000000000000000000000000000000000000e-30", "10000000000")]
    #[case::exponent_truncated_to_int32("1e4294967296", "1")]
    #[case::exponent_truncated_to_int32_plus_3("1e4294967299", "1000")]
    #[case::tiny_exponent_rounds_up("1e-99", "0.000000001")]
    #[case::sub_nano_rounds_up("0.0000000001", "0.000000001")]
    #[case::half_nano_rounds_up("0.0000000005", "0.000000001")]
    #[case::nano_fraction_rounds_up("3.001n", "0.000000004")]
    #[case::exponent_rounds_up("1.1E-9", "0.000000002")]
    #[case::below_a_nano("0.9n", "0.000000001")]
    #[case::five_e_minus_ten("5e-10", "0.000000001")]
    #[case::rounds_up_digits("0.00000012345", "0.000000124")]
    #[case::negative_rounds_away_from_zero("-0.0000000001", "-0.000000001")]
    #[case::negative_nano_fraction("-1.5n", "-0.000000002")]
    #[case::tiny_binary_rounds_up("0.000000000001Ki", "0.000000002")]
    #[case::huge_and_precise(
        "123456789012345678901234567890.123456789012345",
        "123456789012345678901234567890.12345679"
    )]
    #[case::trailing_point("1.", "1")]
    #[case::trailing_point_suffix("1.G", "1000000000")]
    #[case::leading_point(".001", "0.001")]
    fn parses_as_apimachinery_does(#[case] input: &str, #[case] exact: &str) {
        let got = Quantity::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(got.plain(), exact, "{input}");
        assert_eq!(got.to_string(), input, "the text is kept");
    }

    /// Refused by apimachinery too, except the digitless ones (see the module's notes).
    #[rstest]
    #[case::empty("")]
    #[case::only_suffix("Gi")]
    #[case::only_milli("m")]
    #[case::only_exponent("e3")]
    #[case::only_point(".")]
    #[case::only_sign("-")]
    #[case::sign_and_point("-.")]
    #[case::two_points("1.2.3")]
    #[case::two_points_suffix("1.1.M")]
    #[case::unknown_suffix("12XB")]
    #[case::lowercase_kibi("1ki")]
    #[case::uppercase_kilo("1K")]
    #[case::lone_i("1i")]
    #[case::bad_binary(".5i")]
    #[case::milli_i("0.1mi")]
    #[case::am("0.1am")]
    #[case::words("aoeu")]
    #[case::inner_sign("1+1.0M")]
    #[case::bare_e("1e")]
    #[case::e_sign_only("1e+")]
    #[case::e_minus_only("-3.01e-")]
    #[case::double_e("1ee3")]
    #[case::exponent_then_suffix("1e3k")]
    #[case::suffix_then_digits("1m3")]
    #[case::exponent_beyond_i64("1e99999999999999999999")]
    #[case::hex("0x10")]
    #[case::underscore("1_000")]
    #[case::leading_space(" 1")]
    #[case::trailing_space("1 ")]
    #[case::trailing_space_suffix("1Gi ")]
    fn junk_is_refused(#[case] input: &str) {
        assert!(Quantity::parse(input).is_err(), "{input:?} parsed as {:?}", Quantity::parse(input));
    }

    #[rstest]
    #[case::binary_above_decimal("80Gi", "80G", std::cmp::Ordering::Greater)]
    #[case::kibi_is_1024("1Ki", "1024", std::cmp::Ordering::Equal)]
    #[case::fraction_of_gibi("1.5Gi", "1536Mi", std::cmp::Ordering::Equal)]
    #[case::milli_is_tenth("100m", "0.1", std::cmp::Ordering::Equal)]
    #[case::exponent_is_kilo("2e3", "2k", std::cmp::Ordering::Equal)]
    #[case::negative_below_zero("-1", "0", std::cmp::Ordering::Less)]
    #[case::e99_above_the_binary_cap("1e99", "9Ei", std::cmp::Ordering::Greater)]
    #[case::e99_above_41_digits("1e99", "99999999999999999999999999999999999999999", std::cmp::Ordering::Greater)]
    #[case::e99_written_two_ways("1e99", "1000e96", std::cmp::Ordering::Equal)]
    #[case::e99_below_e100("1e99", "1e100", std::cmp::Ordering::Less)]
    #[case::negative_e99_below_negative_cap("-1e99", "-9Ei", std::cmp::Ordering::Less)]
    #[case::capped_values_equal("9Ei", "8Ei", std::cmp::Ordering::Equal)]
    #[case::nano_above_zero("1n", "0", std::cmp::Ordering::Greater)]
    #[case::rounded_nanos_equal("0.1n", "1n", std::cmp::Ordering::Equal)]
    #[case::decimal_above_binary_cap("9223372036854775808", "9Ei", std::cmp::Ordering::Greater)]
    #[case::ten_thousand_tera_above_100_gibi("10000T", "100Gi", std::cmp::Ordering::Greater)]
    fn compares_exactly(#[case] a: &str, #[case] b: &str, #[case] expected: std::cmp::Ordering) {
        assert_eq!(q(a).cmp(&q(b)), expected, "{a} vs {b}");
        assert_eq!(q(b).cmp(&q(a)), expected.reverse(), "{b} vs {a}");
        assert_eq!(q(a) == q(b), expected.is_eq());
    }

    #[test]
    fn integers_and_floats() {
        assert_eq!(q("24Gi").as_integer(), Ok(24 << 30));
        assert!(q("0.5").as_integer().is_err());
        assert!(!q("1500m").is_integer());
        assert!(q("9Ei").is_integer());
        assert!(!q("9223372036854775808").is_integer());
        assert!(!q("1e99").is_integer());
        assert_eq!(q("-3k").as_integer(), Ok(-3000));
        assert_eq!(q("1e30").to_i128(), Some(10i128.pow(30)));
        assert_eq!(q("1e39").to_i128(), None);
        assert_eq!(q("1.5").as_float(), 1.5);
        assert_eq!(q("1e99").as_float(), 1e99);
        assert_eq!(q("-100m").as_float(), -0.1);
        assert_eq!(q("0").as_float(), 0.0);
        assert_eq!(q("1e400").as_float(), f64::INFINITY);
        assert_eq!((q("-2").sign(), q("0").sign(), q("1n").sign()), (-1, 0, 1));
    }

    #[rstest]
    #[case::integers("80Gi", "80Gi", "171798691840", "0")]
    #[case::fractions("1.5", "100m", "1600000000n", "1400000000n")]
    #[case::mixed_signs("-3", "5", "2", "-8")]
    #[case::to_zero("5", "-5", "0", "10")]
    #[case::huge_plus_one(
        "1e99",
        "1",
        "1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001",
        "999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999"
    )]
    #[case::huge("1e99", "1e99", "2e99", "0")]
    #[case::nanos("1n", "999999999n", "1", "-999999998n")]
    fn adds_and_subtracts_exactly(#[case] a: &str, #[case] b: &str, #[case] sum: &str, #[case] difference: &str) {
        let s = q(a).add(&q(b)).unwrap();
        let d = q(a).sub(&q(b)).unwrap();
        assert_eq!((s.to_string(), d.to_string()), (sum.to_string(), difference.to_string()), "{a}, {b}");
        // The canonical text parses back to the same value.
        assert_eq!(q(&s.to_string()), s);
        assert_eq!(q(&d.to_string()), d);
    }

    #[test]
    fn a_sum_too_wide_to_hold_is_refused() {
        assert!(q("1e2000000000").add(&q("1n")).is_err());
        assert_eq!(q("1e2000000000").add(&q("1e2000000000")).map(|s| s.to_string()), Ok("2e2000000000".into()));
    }

    #[test]
    fn from_int_is_canonical() {
        assert_eq!(Quantity::from_int(-42).to_string(), "-42");
        assert_eq!(Quantity::from_int(i64::MIN), q("-9223372036854775808"));
        assert_eq!(Quantity::from_int(0), q("0"));
    }
}
