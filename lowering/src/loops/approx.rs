//! Vector forms of `exp`, `tanh`, `erf` and the logistic function in f32 for the cpu target:
//! polynomials and rational functions in plain arithmetic, so they run on whole vectors where
//! libm would be called once per lane. The same code serves scalars, so a kernel's vector body
//! and its scalar remainder agree.
//!
//! Their error against libm (the `ref` target) is measured by `tests/suite/cpu_kernels.rs` over
//! dense grids of inputs and documented in `docs/performance.md`:
//! - `exp`: range reduction `x = n ln 2 + r` (ln 2 in two parts, so `r` is exact), a degree-6
//!   polynomial for `e^r` on `|r| <= ln 2 / 2`, and `2^n` built in the exponent bits; within
//!   2 ulp. Inputs are clamped to `[-87, 88.8]`: those above ln of the largest float (88.72)
//!   overflow to `inf` as libm's do, those below -87 give about `1.6e-38` where libm gives a
//!   subnormal or 0; NaN stays NaN (no integer conversion: `2^n` is built from the float bits
//!   of `n` plus a magic number).
//! - `tanh`: `x + x^3 P(x^2)` for `|x| < 0.625`, else `1 - 2 / (e^(2|x|) + 1)` with the sign of x.
//! - the logistic function (`sigmoid`, and SiLU's `x * sigmoid(x)`): a rational function of
//!   `x^2` on `[-18, 18]`, absolute error below 3e-7 (relative 1e-4 where it is 1e-3: the `1/2
//!   + ...` form loses the tail's relative accuracy, as onnxruntime's does).
//! - `erf`: a rational function of `x^2` on `[-4, 4]`, relative error below 4e-7.

use super::emit::{Emitter, Ty, V};
use super::scalar::Cmp;

const I32: Ty = Ty::Int { bits: 32, signed: true };

/// Sigmoid's fit: `sigmoid(x) - 1/2 = x P(x^2) / Q(x^2)` on `[-18, 18]`.
const SIGMOID_P: [f64; 6] = [
    0.249_999_975_083_355_6,
    8.072_660_208_580_645e-3,
    4.558_886_633_995_852e-5,
    3.610_050_644_731_364e-8,
    -1.241_437_054_142_341_3e-11,
    4.419_689_059_778_593e-15,
];
const SIGMOID_Q: [f64; 4] = [
    1.0,
    0.115_623_818_420_854_72,
    1.484_391_126_557_746_5e-3,
    3.557_675_472_636_116e-6,
];
/// erf's fit: `erf(x) = x P(x^2) / Q(x^2)` on `[-4, 4]`.
const ERF_P: [f64; 7] = [
    1.128_379_082_357_823,
    0.208_262_507_814_603_65,
    5.167_880_908_181_512e-2,
    4.040_830_951_593_111e-3,
    1.486_215_253_184_932_3e-4,
    -1.949_636_021_460_505_6e-6,
    1.912_094_568_213_307_5e-8,
];
const ERF_Q: [f64; 5] = [
    1.0,
    0.517_898_815_023_780_1,
    0.118_444_159_152_212_06,
    1.505_785_739_902_888_2e-2,
    1.033_742_901_042_819_6e-3,
];

impl Emitter {
    /// This crate's form of the math function `func` on f32 `x`, where it has one.
    pub(super) fn approximate(&mut self, func: &str, x: &V) -> Option<V> {
        match func {
            "exp" => Some(self.exp_f32(x)),
            "tanh" => Some(self.tanh_f32(x)),
            "erf" => Some(self.erf_f32(x)),
            _ => None,
        }
    }

    /// The logistic function `1 / (1 + e^-x)` as `1/2 + x P(x^2) / Q(x^2)` on `[-18, 18]` (a
    /// rational fit of this crate's, least squares reweighted toward the largest errors), the
    /// odd part clamped to `[-1/2, 1/2]`: 15 vector operations where `1 / (1 + e^-x)` takes
    /// about 24.
    pub(super) fn sigmoid_f32(&mut self, x: &V) -> V {
        let odd = self.odd_rational(x, 18.0, &SIGMOID_P, &SIGMOID_Q, 0.5);
        let half = self.float(Ty::F32, 0.5);
        self.add(&odd, &half)
    }

    /// `c[0] + c[1] x + c[2] x^2 + ...` as the pairs `c[2i] + c[2i+1] x`, combined by Horner's
    /// rule in `x2` (`x^2`): the pairs are independent of each other, so the chain of dependent
    /// multiply-adds is half as long as Horner's in `x`, for the one multiplication that makes
    /// `x2` (shared between polynomials in the same `x`).
    fn horner_in_squares(&mut self, x: &V, x2: &V, coefficients: &[f64]) -> V {
        let pairs: Vec<V> = coefficients
            .chunks(2)
            .map(|pair| match *pair {
                [c0, c1] => {
                    let (c0, c1) = (self.float(Ty::F32, c0), self.float(Ty::F32, c1));
                    self.fma(&c1, x, &c0)
                }
                [c0] => self.float(Ty::F32, c0),
                _ => unreachable!("chunks of two"),
            })
            .collect();
        let (last, rest) = pairs.split_last().expect("a polynomial has coefficients");
        rest.iter()
            .rev()
            .fold(last.clone(), |acc, pair| self.fma(&acc, x2, pair))
    }

    /// `c[0] + x * (c[1] + x * (c[2] + ...))`, by Horner's rule with fused multiply-adds.
    fn horner(&mut self, x: &V, coefficients: &[f64]) -> V {
        let (last, rest) = coefficients.split_last().expect("a polynomial has coefficients");
        let mut acc = self.float(Ty::F32, *last);
        for &c in rest.iter().rev() {
            let c = self.float(Ty::F32, c);
            acc = self.fma(&acc, x, &c);
        }
        acc
    }

    fn exp_f32(&mut self, x: &V) -> V {
        let clamped = self.clamp(x, -87.0, 88.8);
        // n = round(x / ln 2), r = x - n ln 2 with ln 2 = C1 + C2, C1 exact in few bits
        let log2e = self.float(Ty::F32, std::f64::consts::LOG2_E);
        let half = self.float(Ty::F32, 0.5);
        let t = self.fma(&clamped, &log2e, &half);
        let n = self.math_op("floor", &t);
        let (c1, c2) = (self.float(Ty::F32, -0.693_359_375), self.float(Ty::F32, 2.121_944_4e-4));
        let r = self.fma(&n, &c1, &clamped);
        let r = self.fma(&n, &c2, &r);
        // e^r = 1 + r + r^2 P(r)
        let p = self.horner(
            &r,
            &[
                5.000_000_120_1e-1,
                1.666_666_545_9e-1,
                4.166_579_589_4e-2,
                8.333_451_907_3e-3,
                1.398_199_950_7e-3,
                1.987_569_150_0e-4,
            ],
        );
        let r2 = self.mul(&r, &r);
        let one = self.one(Ty::F32);
        let p = self.fma(&p, &r2, &r);
        let er = self.add(&p, &one);
        // 2^n as 2^(n-1) * 2, so that n = 128 (the largest inputs) gives inf, not NaN; 2^(n-1)
        // from the bits of n + 1.5 * 2^23 + 126 (n + 126 in its low mantissa bits) shifted into
        // the exponent: float arithmetic throughout, so NaN stays NaN (its bits shift to 0, and
        // NaN * 0 is NaN) where an integer conversion of NaN would be undefined
        let magic = self.float(Ty::F32, 12_582_912.0 + 126.0);
        let biased = self.add(&n, &magic);
        let bits = self.bitcast(&biased, I32);
        let bits = self.bits_const("shli", &bits, 23);
        let scale = self.bitcast(&bits, Ty::F32);
        let two = self.float(Ty::F32, 2.0);
        let y = self.mul(&er, &scale);
        self.mul(&y, &two)
    }

    fn tanh_f32(&mut self, x: &V) -> V {
        let ax = self.abs(x);
        // small |x|: x + x^3 P(x^2)
        let z = self.mul(x, x);
        let p = self.horner(
            &z,
            &[
                -3.333_328_194_22e-1,
                1.333_144_220_36e-1,
                -5.373_971_555_31e-2,
                2.063_908_879_54e-2,
                -5.704_988_727_45e-3,
            ],
        );
        let xz = self.mul(x, &z);
        let small = self.fma(&xz, &p, x);
        // otherwise 1 - 2 / (e^(2|x|) + 1), signed
        let two = self.float(Ty::F32, 2.0);
        let one = self.one(Ty::F32);
        let twice = self.mul(&ax, &two);
        let e = self.exp_f32(&twice);
        let denominator = self.add(&e, &one);
        let q = self.div(&two, &denominator);
        let large = self.sub(&one, &q);
        let large = self.with_sign_of(x, &large);
        let limit = self.float(Ty::F32, 0.625);
        let is_small = self.cmp(Cmp::Lt, &ax, &limit);
        self.select(&is_small, &small, &large)
    }

    /// `erf(x)` as `x P(x^2) / Q(x^2)` on `[-4, 4]` (a rational fit of this crate's), the
    /// result clamped to `[-1, 1]`, which it reaches by 3.95.
    fn erf_f32(&mut self, x: &V) -> V {
        self.odd_rational(x, 4.0, &ERF_P, &ERF_Q, 1.0)
    }

    /// The fitted odd functions, `x P(x^2) / Q(x^2)` on `[-limit, limit]`, clamped to
    /// `[-bound, bound]` (the function's limits at the infinities). Beyond the fit, `x^2` is
    /// held at `limit^2`: there `|x| P / Q` is about `|x| / limit` times the value at `limit`,
    /// which the clamp takes to `bound` (and infinities too; NaN stays NaN). One bound on `x^2`
    /// instead of two on `x`, and the polynomials in squares of `x^2`, shorten the chain of
    /// dependent operations by about a quarter, which is what a vector of them waits on.
    fn odd_rational(&mut self, x: &V, limit: f64, p: &[f64], q: &[f64], bound: f64) -> V {
        let square = self.mul(x, x);
        let largest = self.float(Ty::F32, limit * limit);
        let z = self.at_most(&square, &largest);
        let z2 = self.mul(&z, &z);
        let p = self.horner_in_squares(&z, &z2, p);
        let q = self.horner_in_squares(&z, &z2, q);
        let xp = self.mul(x, &p);
        let y = self.div(&xp, &q);
        self.clamp(&y, -bound, bound)
    }

    /// `x` clamped to `[lo, hi]` (NaN stays NaN).
    fn clamp(&mut self, x: &V, lo: f64, hi: f64) -> V {
        let (lo, hi) = (self.float(Ty::F32, lo), self.float(Ty::F32, hi));
        let above = self.at_least(x, &lo);
        self.at_most(&above, &hi)
    }

    /// `magnitude` negated where `x` is negative (the odd functions' symmetry).
    fn with_sign_of(&mut self, x: &V, magnitude: &V) -> V {
        let negated = self.neg(magnitude);
        let zero = self.zero(Ty::F32);
        let negative = self.cmp(Cmp::Lt, x, &zero);
        self.select(&negative, &negated, magnitude)
    }

    /// `math.<func>` itself (no approximation).
    fn math_op(&mut self, func: &str, a: &V) -> V {
        self.op_lanes("v", a.ty, a.lanes, &format!("math.{func} {a} : {}", a.mlir_ty()))
    }
}
