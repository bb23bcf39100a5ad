//! Kubernetes resource quantities ("80Gi", "1.5", "100m", "2e3") as exact values, the way the
//! DRA CEL library compares them.

use std::cmp::Ordering;
use std::fmt;

/// One billionth is the finest unit a Kubernetes quantity keeps ("1n"); values are held in
/// those units so that binary and decimal suffixes compare exactly.
const NANO: i128 = 1_000_000_000;

#[derive(Clone, Debug)]
pub struct Quantity {
    /// The value in nano-units.
    nanos: i128,
    /// The text it was parsed from, for messages.
    text: String,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Quantity {
    pub fn parse(text: &str) -> Result<Quantity, String> {
        let bad = || format!("{text:?} is not a quantity");
        let s = text.trim();
        let (sign, s) = match s.as_bytes().first() {
            Some(b'-') => (-1, &s[1..]),
            Some(b'+') => (1, &s[1..]),
            _ => (1, s),
        };
        let num_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (number, suffix) = s.split_at(num_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(bad());
        }
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        let digits: i128 = format!("{whole}{frac}").parse().map_err(|_| bad())?;
        let frac_digits = frac.len() as u32;
        // The multiplier in nano-units.
        let multiplier: i128 = match suffix {
            "n" => 1,
            "u" => 1_000,
            "m" => 1_000_000,
            "" => NANO,
            "k" => 1_000 * NANO,
            "M" => 1_000_000 * NANO,
            "G" => 1_000_000_000 * NANO,
            "T" => 1_000_000_000_000 * NANO,
            "P" => 1_000_000_000_000_000 * NANO,
            "E" => 1_000_000_000_000_000_000 * NANO,
            "Ki" => (1 << 10) * NANO,
            "Mi" => (1 << 20) * NANO,
            "Gi" => (1 << 30) * NANO,
            "Ti" => (1 << 40) * NANO,
            "Pi" => (1 << 50) * NANO,
            "Ei" => (1 << 60) * NANO,
            exp if exp.starts_with(['e', 'E']) => {
                let e: i32 = exp[1..].parse().map_err(|_| bad())?;
                let e = e + 9;
                if !(0..=36).contains(&e) {
                    return Err(format!("{text:?}: exponent out of range"));
                }
                10i128.pow(e as u32)
            }
            _ => return Err(bad()),
        };
        let scaled = digits.checked_mul(multiplier).ok_or_else(|| format!("{text:?} is too large"))?;
        // Finer than a nano-unit rounds up, as Kubernetes does.
        let div = 10i128.checked_pow(frac_digits).ok_or_else(bad)?;
        let nanos = (scaled + div - 1) / div;
        Ok(Quantity { nanos: sign * nanos, text: text.to_string() })
    }

    fn from_nanos(nanos: i128) -> Quantity {
        let text = if nanos % NANO == 0 { (nanos / NANO).to_string() } else { format!("{nanos}n") };
        Quantity { nanos, text }
    }

    pub fn from_int(v: i64) -> Quantity {
        Quantity::from_nanos(v as i128 * NANO)
    }

    pub fn sign(&self) -> i64 {
        self.nanos.signum() as i64
    }

    pub fn is_integer(&self) -> bool {
        self.nanos % NANO == 0 && i64::try_from(self.nanos / NANO).is_ok()
    }

    pub fn as_integer(&self) -> Result<i64, String> {
        if self.nanos % NANO != 0 {
            return Err(format!("cannot convert value to integer: {self} has a fraction"));
        }
        i64::try_from(self.nanos / NANO).map_err(|_| format!("cannot convert value to integer: {self} is too large"))
    }

    pub fn as_float(&self) -> f64 {
        self.nanos as f64 / NANO as f64
    }

    pub fn add(&self, other: &Quantity) -> Result<Quantity, String> {
        self.nanos.checked_add(other.nanos).map(Quantity::from_nanos).ok_or_else(|| "quantity overflow".into())
    }

    pub fn sub(&self, other: &Quantity) -> Result<Quantity, String> {
        self.nanos.checked_sub(other.nanos).map(Quantity::from_nanos).ok_or_else(|| "quantity overflow".into())
    }
}

#[cfg(test)]
mod tests {
    use super::Quantity;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn binary_and_decimal_suffixes_compare_exactly() {
        assert!(q("80Gi") > q("80G"));
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("1.5Gi"), q("1536Mi"));
        assert_eq!(q("100m"), q("0.1"));
        assert_eq!(q("2e3"), q("2k"));
        assert!(q("-1") < q("0"));
        assert_eq!(q("24Gi").as_integer(), Ok(24 << 30));
        assert!(q("0.5").as_integer().is_err());
        assert!(!q("1500m").is_integer());
    }

    #[test]
    fn junk_is_refused() {
        for s in ["", "Gi", "1.2.3", "12XB", "1e99", "."] {
            assert!(Quantity::parse(s).is_err(), "{s}");
        }
    }
}
