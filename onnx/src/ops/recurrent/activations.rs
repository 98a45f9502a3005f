//! The activation functions a recurrent layer's `activations` attribute names, with the
//! `activation_alpha` and `activation_beta` values they take.

use super::super::super::ctx::Ctx;
use super::super::super::node::NodeView;
use super::super::super::proto::attribute_proto::AttributeType;
use super::super::activation::{affine, elu_of, hard_sigmoid_of, softplus_of, softsign_of, thresholded_relu_of};
use mxc_dialects::{Attr, Attrs, OpKind, ValueId};

/// One activation function with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Activation {
    Relu,
    Tanh,
    Sigmoid,
    Softsign,
    Softplus,
    /// `alpha * x + beta`.
    Affine {
        alpha: f64,
        beta: f64,
    },
    LeakyRelu {
        alpha: f64,
    },
    /// `x` where `x > alpha`, else 0.
    ThresholdedRelu {
        alpha: f64,
    },
    /// `alpha * tanh(beta * x)`.
    ScaledTanh {
        alpha: f64,
        beta: f64,
    },
    HardSigmoid {
        alpha: f64,
        beta: f64,
    },
    Elu {
        alpha: f64,
    },
}

/// The activations of every direction, in order (`per_direction` each): the node's
/// `activations`, or `defaults` for each direction when it has none.
///
/// `activation_alpha` and `activation_beta` are consumed in order by the activations that take
/// such a value (as onnxruntime reads them); one that finds its list used up gets the default
/// of the ONNX operator of its name. A list with values left over is refused, since it was
/// likely written for the other reading (one value per activation).
pub(super) fn parse(node: &NodeView, defaults: &[&str], directions: usize) -> Result<Vec<Activation>, String> {
    let names = match strings(node, "activations")? {
        Some(names) => names,
        None => defaults.repeat(directions).into_iter().map(String::from).collect(),
    };
    let expected = defaults.len() * directions;
    if names.len() != expected {
        return Err(format!(
            "`activations` must name {expected} functions ({} per direction), got {names:?}",
            defaults.len()
        ));
    }
    let mut alpha = Params::new(node, "activation_alpha")?;
    let mut beta = Params::new(node, "activation_beta")?;
    let activations = names
        .iter()
        .map(|name| Activation::new(name, &mut alpha, &mut beta))
        .collect::<Result<Vec<_>, _>>()?;
    alpha.check_used()?;
    beta.check_used()?;
    Ok(activations)
}

/// The STRINGS attribute `name` (`NodeView` has no accessor for lists of strings; `has` marks
/// the attribute read).
fn strings(node: &NodeView, name: &str) -> Result<Option<Vec<String>>, String> {
    if !node.has(name) {
        return Ok(None);
    }
    let Some(a) = node.proto.attribute.iter().find(|a| a.name() == name) else {
        return Ok(None);
    };
    if a.r#type.is_some() && a.r#type() != AttributeType::Strings {
        return Err(format!(
            "attribute `{name}` must be a list of strings, got {}",
            a.r#type().as_str_name()
        ));
    }
    a.strings
        .iter()
        .map(|s| String::from_utf8(s.clone()).map_err(|_| format!("attribute `{name}` is not UTF-8")))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The values of `activation_alpha` or `activation_beta`, handed out in order.
struct Params {
    attr: &'static str,
    values: Vec<f32>,
    used: usize,
}

impl Params {
    fn new(node: &NodeView, attr: &'static str) -> Result<Params, String> {
        let values = node.opt_floats(attr)?.unwrap_or_default();
        Ok(Params { attr, values, used: 0 })
    }

    /// The next value for `activation`, or its `default` once the list is used up (an
    /// activation without a default needs a value).
    fn take(&mut self, activation: &str, default: Option<f64>) -> Result<f64, String> {
        match self.values.get(self.used) {
            Some(&v) => {
                self.used += 1;
                Ok(v as f64)
            }
            None => default.ok_or_else(|| format!("activation {activation} needs a value in `{}`", self.attr)),
        }
    }

    fn check_used(&self) -> Result<(), String> {
        if self.used < self.values.len() {
            return Err(format!(
                "`{}` has {} values but the activations take {}",
                self.attr,
                self.values.len(),
                self.used
            ));
        }
        Ok(())
    }
}

impl Activation {
    /// The activation called `name` (in any case, as runtimes accept it), taking its
    /// parameters from `alpha` and `beta`.
    fn new(name: &str, alpha: &mut Params, beta: &mut Params) -> Result<Activation, String> {
        use Activation::*;
        Ok(match name.to_ascii_lowercase().as_str() {
            "relu" => Relu,
            "tanh" => Tanh,
            "sigmoid" => Sigmoid,
            "softsign" => Softsign,
            "softplus" => Softplus,
            // ONNX's experimental Affine operator defaulted to the identity.
            "affine" => Affine {
                alpha: alpha.take(name, Some(1.0))?,
                beta: beta.take(name, Some(0.0))?,
            },
            "leakyrelu" => LeakyRelu {
                alpha: alpha.take(name, Some(0.01))?,
            },
            "thresholdedrelu" => ThresholdedRelu {
                alpha: alpha.take(name, Some(1.0))?,
            },
            // ScaledTanh never had defaults.
            "scaledtanh" => ScaledTanh {
                alpha: alpha.take(name, None)?,
                beta: beta.take(name, None)?,
            },
            "hardsigmoid" => HardSigmoid {
                alpha: alpha.take(name, Some(0.2))?,
                beta: beta.take(name, Some(0.5))?,
            },
            "elu" => Elu {
                alpha: alpha.take(name, Some(1.0))?,
            },
            _ => return Err(format!("unsupported activation function \"{name}\"")),
        })
    }

    pub(super) fn apply(self, ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
        use Activation::*;
        match self {
            Relu => ctx.op(OpKind::Relu, &[x]),
            Tanh => ctx.op(OpKind::Tanh, &[x]),
            Sigmoid => ctx.op(OpKind::Sigmoid, &[x]),
            Softsign => softsign_of(ctx, x),
            Softplus => softplus_of(ctx, x),
            Affine { alpha, beta } => affine(ctx, alpha, x, beta),
            LeakyRelu { alpha } => ctx.build1(
                OpKind::LeakyRelu,
                vec![x],
                Attrs::new().with("alpha", Attr::Float(alpha)),
            ),
            ThresholdedRelu { alpha } => thresholded_relu_of(ctx, x, alpha),
            ScaledTanh { alpha, beta } => {
                let scaled = affine(ctx, beta, x, 0.0)?;
                let t = ctx.op(OpKind::Tanh, &[scaled])?;
                affine(ctx, alpha, t, 0.0)
            }
            HardSigmoid { alpha, beta } => hard_sigmoid_of(ctx, x, alpha, beta),
            Elu { alpha } => elu_of(ctx, x, alpha),
        }
    }
}
