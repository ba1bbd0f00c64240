//! Symbolic counts: sums of products of symbols with non-negative coefficients, such as
//! `3 + 2*len(topics) + len(a)*rounds`. Every symbol stands for a count that cannot be
//! negative (a list's length, an input number), which is what makes the coefficient-wise
//! [`Poly::min`] and [`Poly::max`] sound bounds.

use std::collections::BTreeMap;
use std::fmt::Write;

/// A polynomial over symbols: monomial (sorted symbol names; empty for the constant) to
/// coefficient. Coefficients are non-negative; zero ones are not kept.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Poly {
    terms: BTreeMap<Vec<String>, f64>,
}

impl Poly {
    /// Zero.
    pub fn zero() -> Poly {
        Poly::default()
    }

    /// A constant.
    pub fn constant(c: f64) -> Poly {
        Poly::zero().plus_term(Vec::new(), c)
    }

    /// One symbol.
    pub fn symbol(name: impl Into<String>) -> Poly {
        Poly::zero().plus_term(vec![name.into()], 1.0)
    }

    fn plus_term(mut self, mono: Vec<String>, c: f64) -> Poly {
        if c > 0.0 {
            *self.terms.entry(mono).or_insert(0.0) += c;
        }
        self
    }

    /// Whether it is zero.
    pub fn is_zero(&self) -> bool {
        self.terms.is_empty()
    }

    /// Its value if it has no symbols.
    pub fn as_constant(&self) -> Option<f64> {
        match self.terms.len() {
            0 => Some(0.0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The terms: symbols (none for the constant) and coefficient, constant first.
    pub fn terms(&self) -> impl Iterator<Item = (&[String], f64)> {
        self.terms.iter().map(|(m, c)| (m.as_slice(), *c))
    }

    /// The symbols it mentions.
    pub fn symbols(&self) -> impl Iterator<Item = &String> {
        self.terms.keys().flatten()
    }

    /// `self + other`.
    pub fn add(&self, other: &Poly) -> Poly {
        let mut out = self.clone();
        for (m, c) in &other.terms {
            out = out.plus_term(m.clone(), *c);
        }
        out
    }

    /// `self * other`.
    pub fn mul(&self, other: &Poly) -> Poly {
        let mut out = Poly::zero();
        for (m1, c1) in &self.terms {
            for (m2, c2) in &other.terms {
                let mut m: Vec<String> = m1.iter().chain(m2).cloned().collect();
                m.sort();
                out = out.plus_term(m, c1 * c2);
            }
        }
        out
    }

    /// `self * k`.
    pub fn scale(&self, k: f64) -> Poly {
        self.mul(&Poly::constant(k))
    }

    /// Whether every coefficient of `self` is at least `other`'s: then `self >= other`
    /// whatever the symbols are.
    pub fn dominates(&self, other: &Poly) -> bool {
        other
            .terms
            .iter()
            .all(|(m, c)| self.terms.get(m).is_some_and(|s| *s >= *c))
    }

    /// A lower bound of both, and whether it is exact (one of them is below the other for
    /// every value of the symbols): the coefficient-wise minimum otherwise.
    pub fn min(&self, other: &Poly) -> (Poly, bool) {
        if other.dominates(self) {
            return (self.clone(), true);
        }
        if self.dominates(other) {
            return (other.clone(), true);
        }
        let mut out = Poly::zero();
        for (m, c) in &self.terms {
            if let Some(o) = other.terms.get(m) {
                out = out.plus_term(m.clone(), c.min(*o));
            }
        }
        (out, false)
    }

    /// An upper bound of both, and whether it is exact: the coefficient-wise maximum when
    /// neither is above the other for every value of the symbols.
    pub fn max(&self, other: &Poly) -> (Poly, bool) {
        if self.dominates(other) {
            return (self.clone(), true);
        }
        if other.dominates(self) {
            return (other.clone(), true);
        }
        let mut out = self.clone();
        for (m, c) in &other.terms {
            let cur = out.terms.get(m).copied().unwrap_or(0.0);
            if *c > cur {
                out.terms.insert(m.clone(), *c);
            }
        }
        (out, false)
    }

    /// Its value with every symbol at `value` (for evaluation in tests and examples).
    pub fn eval(&self, value: impl Fn(&str) -> f64) -> f64 {
        self.terms
            .iter()
            .map(|(m, c)| c * m.iter().map(|s| value(s)).product::<f64>())
            .sum()
    }

    /// Written with `coefficient` formatting each coefficient (`None`: the coefficient is
    /// one and left out before symbols): `3 + 2*len(topics)`.
    pub fn render(&self, coefficient: impl Fn(f64) -> String) -> String {
        if self.terms.is_empty() {
            return coefficient(0.0);
        }
        let mut out = String::new();
        // The constant, then by degree, then by name.
        let mut terms: Vec<_> = self.terms.iter().collect();
        terms.sort_by(|a, b| (a.0.len(), a.0).cmp(&(b.0.len(), b.0)));
        for (i, (m, c)) in terms.into_iter().enumerate() {
            if i > 0 {
                out.push_str(" + ");
            }
            if m.is_empty() {
                out.push_str(&coefficient(*c));
                continue;
            }
            let k = coefficient(*c);
            if k != "1" {
                let _ = write!(out, "{k}*");
            }
            out.push_str(&m.join("*"));
        }
        out
    }
}

/// A count as an integer where it is one: `3`, `2.5`.
pub fn count(c: f64) -> String {
    if (c - c.round()).abs() < 1e-9 && c.abs() < 1e15 {
        format!("{}", c.round() as i64)
    } else {
        format!("{c:.2}")
    }
}

/// An amount in US dollars: cents from a dollar up, four decimals below it.
pub fn dollars(c: f64) -> String {
    if c >= 1.0 || c == 0.0 {
        format!("${c:.2}")
    } else {
        format!("${c:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str) -> Poly {
        Poly::symbol(name)
    }

    #[test]
    fn sums_and_products_simplify() {
        let p = Poly::constant(3.0).add(&s("len(t)").scale(2.0));
        let q = p.mul(&s("n")).add(&s("n"));
        assert_eq!(q.render(count), "4*n + 2*len(t)*n");
        assert_eq!(Poly::zero().render(count), "0");
        assert_eq!(s("x").add(&s("x")).render(count), "2*x");
        assert_eq!(Poly::constant(5.0).mul(&Poly::zero()), Poly::zero());
        assert_eq!(p.as_constant(), None);
        assert_eq!(Poly::constant(4.0).as_constant(), Some(4.0));
        assert_eq!(p.eval(|_| 10.0), 23.0);
    }

    #[test]
    fn min_and_max_are_exact_when_one_dominates() {
        let a = Poly::constant(1.0).add(&s("x"));
        let b = Poly::constant(3.0).add(&s("x").scale(2.0));
        assert_eq!(a.max(&b), (b.clone(), true));
        assert_eq!(a.min(&b), (a.clone(), true));
        // 3 against 2*x: neither is always larger.
        let c = Poly::constant(3.0);
        let d = s("x").scale(2.0);
        let (hi, exact) = c.max(&d);
        assert!(!exact);
        assert_eq!(hi.render(count), "3 + 2*x");
        let (lo, exact) = c.min(&d);
        assert!(!exact);
        assert_eq!(lo, Poly::zero());
    }

    #[test]
    fn amounts_are_written_for_people() {
        assert_eq!(count(12.0), "12");
        assert_eq!(dollars(0.021), "$0.0210");
        assert_eq!(dollars(12.5), "$12.50");
        assert_eq!(s("len(t)").scale(0.021).render(dollars), "$0.0210*len(t)");
    }
}
