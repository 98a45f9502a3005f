//! Comparing a value a program computed with a reference (what `ref` computed, for `mxc
//! verify`; a file of expected outputs, for `mxc-runner --check`): elementwise
//! `|a - b| <= atol + rtol * |b|` (NaN matches NaN), optionally the RMS of the difference
//! relative to the RMS of ref's value; integers and bools exactly.

use mxc_dialects::Tensor;

/// How close a target's value must be to ref's.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
    /// A further absolute tolerance, this fraction of ref's largest finite magnitude in the
    /// output: rounding that a half-precision program does at every op grows through a deep
    /// network in proportion to the values' scale, not to each element's own size.
    pub of_largest: f64,
    /// When given, also `rms(a - b) / rms(b) <= rms` (`rms(a - b) <= rms` when ref's is 0).
    pub rms: Option<f64>,
}

/// How a value differs from ref's.
#[derive(Clone, Debug)]
pub struct Diff {
    /// The largest |a - b| (NaN where exactly one side is NaN).
    pub max_abs: f64,
    /// RMS of a - b, relative to RMS of b (absolute when b's is 0).
    pub rms_rel: f64,
    /// Elements outside the elementwise tolerance.
    pub outside: usize,
    /// Whether that tolerance had a part relative to the largest magnitude (`of_largest`).
    pub scaled: bool,
    pub len: usize,
    /// Why the values cannot be compared at all (type or shape), if so.
    pub mismatch: Option<String>,
    pub ok: bool,
}

impl Diff {
    /// `max |diff| X, rms Y ok` or `... FAIL (N of M elements outside atol + rtol*|ref|)`.
    pub fn describe(&self) -> String {
        if let Some(m) = &self.mismatch {
            return format!("{m} FAIL");
        }
        let verdict = if self.ok {
            "ok".to_string()
        } else if self.outside > 0 {
            let scale = if self.scaled { " + scale*max|ref|" } else { "" };
            format!(
                "FAIL ({} of {} elements outside atol + rtol*|ref|{scale})",
                self.outside, self.len
            )
        } else {
            "FAIL (relative rms above --rms-tol)".to_string()
        };
        format!("max |diff| {:.3e}, rms {:.3e} {verdict}", self.max_abs, self.rms_rel)
    }
}

/// `actual` (the target's) against `expected` (ref's); a string element is equal or differs by 1.
pub fn compare(actual: &Tensor, expected: &Tensor, tol: &Tolerance) -> Diff {
    let len = expected.len();
    if actual.ty != expected.ty {
        return Diff {
            max_abs: f64::NAN,
            rms_rel: f64::NAN,
            outside: len,
            scaled: false,
            len,
            mismatch: Some(format!("{} instead of ref's {}", actual.ty, expected.ty)),
            ok: false,
        };
    }
    let float = expected.dtype().is_float();
    let strings = actual.strings().zip(expected.strings());
    let largest = match float && tol.of_largest > 0.0 {
        true => (0..len)
            .map(|i| expected.get_f64(i).abs())
            .filter(|b| b.is_finite())
            .fold(0.0, f64::max),
        false => 0.0,
    };
    let atol = tol.atol + tol.of_largest * largest;
    let (mut max_abs, mut sq_diff, mut sq_ref, mut outside) = (0.0f64, 0.0f64, 0.0f64, 0);
    for i in 0..len {
        // a string element that differs counts as a difference of 1
        let (diff, close, b) = if let Some((a, b)) = &strings {
            let same = a[i] == b[i];
            (f64::from(u8::from(!same)), same, 0.0)
        } else if float {
            let (a, b) = (actual.get_f64(i), expected.get_f64(i));
            let same = a == b || (a.is_nan() && b.is_nan());
            let diff = if same { 0.0 } else { (a - b).abs() };
            (diff, same || diff <= atol + tol.rtol * b.abs(), b)
        } else {
            let (a, b) = (actual.get_i64(i), expected.get_i64(i));
            ((a as f64 - b as f64).abs(), a == b, b as f64)
        };
        if !close {
            outside += 1;
        }
        if diff.is_nan() || diff > max_abs {
            max_abs = if max_abs.is_nan() { max_abs } else { diff };
        }
        sq_diff += diff * diff;
        if b.is_finite() {
            sq_ref += b * b;
        }
    }
    let n = len.max(1) as f64;
    let (rms_diff, rms_ref) = ((sq_diff / n).sqrt(), (sq_ref / n).sqrt());
    let rms_rel = if rms_ref > 0.0 { rms_diff / rms_ref } else { rms_diff };
    let rms_ok = tol.rms.is_none_or(|t| rms_rel <= t);
    Diff {
        max_abs,
        rms_rel,
        outside,
        scaled: tol.of_largest > 0.0,
        len,
        mismatch: None,
        ok: outside == 0 && rms_ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOL: Tolerance = Tolerance {
        rtol: 1e-4,
        atol: 1e-5,
        of_largest: 0.0,
        rms: None,
    };

    #[test]
    fn close_floats_pass_and_far_ones_fail() {
        let b = Tensor::from_f32s(vec![3], &[1.0, -2.0, f32::NAN]);
        let near = Tensor::from_f32s(vec![3], &[1.00005, -2.0, f32::NAN]);
        let far = Tensor::from_f32s(vec![3], &[1.1, -2.0, 0.0]);
        assert!(compare(&near, &b, &TOL).ok);
        let d = compare(&far, &b, &TOL);
        assert!(!d.ok && d.outside == 2, "{d:?}");
        assert!(d.max_abs.is_nan(), "a NaN on one side only is the largest difference");
    }

    #[test]
    fn rms_tolerance_is_relative_to_ref() {
        let b = Tensor::from_f32s(vec![2], &[10.0, -10.0]);
        let a = Tensor::from_f32s(vec![2], &[10.5, -10.5]);
        let loose = Tolerance {
            rtol: 1.0,
            atol: 0.0,
            of_largest: 0.0,
            rms: Some(0.1),
        };
        let tight = Tolerance {
            rms: Some(0.01),
            ..loose
        };
        assert!(compare(&a, &b, &loose).ok);
        let d = compare(&a, &b, &tight);
        assert!(!d.ok && d.outside == 0 && (d.rms_rel - 0.05).abs() < 1e-6, "{d:?}");
    }

    #[test]
    fn integers_compare_exactly_and_types_must_agree() {
        use mxc_dialects::DType;
        let b = Tensor::from_i64s(DType::I64, vec![2], &[1, 2]);
        let a = Tensor::from_i64s(DType::I64, vec![2], &[1, 3]);
        let loose = Tolerance {
            rtol: 1.0,
            atol: 10.0,
            of_largest: 0.0,
            rms: None,
        };
        assert!(!compare(&a, &b, &loose).ok);
        assert!(compare(&b, &b, &loose).ok);
        let f = Tensor::from_f32s(vec![2], &[1.0, 2.0]);
        assert!(compare(&f, &b, &loose).mismatch.is_some());
    }

    #[test]
    fn a_tolerance_of_the_largest_magnitude_admits_small_elements_off_by_it() {
        let b = Tensor::from_f32s(vec![3], &[100.0, 0.01, -50.0]);
        let a = Tensor::from_f32s(vec![3], &[100.0, 0.5, -50.0]);
        let elementwise = Tolerance {
            rtol: 1e-2,
            atol: 0.0,
            of_largest: 0.0,
            rms: None,
        };
        assert_eq!(compare(&a, &b, &elementwise).outside, 1);
        let scaled = Tolerance {
            of_largest: 1e-2,
            ..elementwise
        };
        assert!(compare(&a, &b, &scaled).ok, "0.49 <= 1e-2 * 100");
        let tighter = Tolerance {
            of_largest: 1e-3,
            ..elementwise
        };
        assert!(!compare(&a, &b, &tighter).ok);
    }
}
