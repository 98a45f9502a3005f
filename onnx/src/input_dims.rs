//! A model's tensor inputs as dimensions: the sizes the model fixes, its `dim_param`s and
//! unnamed dynamic axes as symbols (named by `dim::symbol_name` and `dim::unnamed_axis`, in
//! `[1..DEFAULT_MAX]`), and the dimensions the user gave (`--shape`) in their place. A
//! `dim_param` names one size wherever it appears (ONNX's meaning), so the dimension given for
//! it in one input stands for it in every other input.

use super::data::input_kinds;
use super::model::decode_model;
use super::proto::tensor_shape_proto::dimension::Value as OnnxDim;
use super::proto::type_proto::Value as TypeValue;
use super::proto::ValueInfoProto;
use super::ImportError;
use mxc_dialects::dim::{self, Dim, InputDims, Symbol};
use std::collections::HashMap;
use std::path::Path;

/// A declared dimension.
enum Declared {
    Fixed(u64),
    Param(String),
    Unnamed,
}

/// The dimensions of the tensor inputs of the model in `path`, `given` (by input name)
/// replacing the declared ones (they must agree where the model fixes a size). An input
/// whose shape is not declared needs one given; a sequence or optional input is left out, as
/// are fixed shapes given for other names (the importer checks those).
pub fn model_input_dims(path: &Path, given: &HashMap<String, Vec<Dim>>) -> Result<InputDims, ImportError> {
    let model = decode_model(path)?;
    let graph = model.graph.unwrap_or_default();
    let tensor_inputs: Vec<&ValueInfoProto> = input_kinds(&graph)
        .into_iter()
        .filter(|(_, kind)| *kind == super::data::DataKind::Tensor)
        .filter_map(|(name, _)| graph.input.iter().find(|vi| vi.name() == name))
        .collect();
    let fail = |input: &str, message: String| ImportError::Input {
        input: input.to_string(),
        message,
    };
    // a fixed shape for another name (a sequence's element, a typo) is the importer's to check
    let unknown = |n: &String| !tensor_inputs.iter().any(|vi| vi.name() == n.as_str());
    if let Some((name, _)) = given
        .iter()
        .find(|(n, d)| unknown(n) && d.iter().any(|d| d.as_constant().is_none()))
    {
        return Err(fail(
            name,
            "the model has no tensor input of this name to give symbolic sizes".into(),
        ));
    }
    // what each dim_param stands for, from the shapes given
    let mut params: HashMap<String, Dim> = HashMap::new();
    for vi in &tensor_inputs {
        let (Some(shape), Some(declared)) = (given.get(vi.name()), declared(vi)) else {
            continue;
        };
        if shape.len() != declared.len() {
            return Err(fail(
                vi.name(),
                format!(
                    "the shape given has {} dimensions, the model declares {}",
                    shape.len(),
                    declared.len()
                ),
            ));
        }
        for (axis, (d, g)) in declared.iter().zip(shape).enumerate() {
            match d {
                Declared::Fixed(n) if g.as_constant() != Some(*n) => {
                    return Err(fail(
                        vi.name(),
                        format!(
                            "dimension {axis} is {n} in the model, and the shape given, {}, makes it {g}",
                            dim::show(shape)
                        ),
                    ))
                }
                Declared::Param(p) => {
                    params.entry(p.clone()).or_insert_with(|| g.clone());
                }
                _ => {}
            }
        }
    }
    let mut inputs = Vec::new();
    for vi in tensor_inputs {
        let name = vi.name();
        let dims = match (given.get(name), declared(vi)) {
            (Some(shape), _) => shape.clone(),
            (None, None) => return Err(fail(name, "its shape is not declared; give the input's shape".into())),
            (None, Some(declared)) => declared
                .into_iter()
                .enumerate()
                .map(|(axis, d)| match d {
                    Declared::Fixed(n) => Ok(Dim::constant(n)),
                    Declared::Param(p) => match params.get(&p) {
                        Some(d) => Ok(d.clone()),
                        None => symbol(&dim::symbol_name(&p)),
                    },
                    Declared::Unnamed => symbol(&dim::unnamed_axis(name, axis)),
                })
                .collect::<Result<Vec<Dim>, ImportError>>()?,
        };
        inputs.push((name.to_string(), dims));
    }
    InputDims::new(inputs).map_err(|e| ImportError::Model(format!("the inputs' dimensions: {e}")))
}

/// A symbol with no constraints of its own (`[1..DEFAULT_MAX]`).
fn symbol(name: &str) -> Result<Dim, ImportError> {
    Symbol::new(name, Vec::new(), Vec::new())
        .map(Dim::symbol)
        .map_err(|e| ImportError::Model(e.to_string()))
}

/// The declared dimensions of a tensor input, if its shape is declared.
fn declared(vi: &ValueInfoProto) -> Option<Vec<Declared>> {
    let Some(TypeValue::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return None;
    };
    let dims = &t.shape.as_ref()?.dim;
    Some(
        dims.iter()
            .map(|d| match &d.value {
                Some(OnnxDim::DimValue(v)) if *v >= 0 => Declared::Fixed(*v as u64),
                Some(OnnxDim::DimParam(p)) if !p.is_empty() => Declared::Param(p.clone()),
                _ => Declared::Unnamed,
            })
            .collect(),
    )
}

/// The element type of each tensor input of the model in `path` that declares a known one.
pub fn model_input_types(path: &Path) -> Result<HashMap<String, mxc_dialects::DType>, ImportError> {
    let model = decode_model(path)?;
    let graph = model.graph.unwrap_or_default();
    Ok((graph.input.iter())
        .filter_map(|vi| match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(TypeValue::TensorType(t)) => {
                super::tensor::dtype_of(t.elem_type()).map(|d| (vi.name().to_string(), d))
            }
            _ => None,
        })
        .collect())
}
