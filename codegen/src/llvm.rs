//! LLVM with inkwell: adds an array-of-pointers entry for every kernel, optimises for the
//! target and emits a position-independent x86-64 object.

use crate::{code_cpu, plan::llvm_entry_name, CodeCpu, CodegenError, OptLevel, Target};
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target as LlvmTarget, TargetMachine, TargetTriple,
};
use inkwell::{AddressSpace, OptimizationLevel};

const TRIPLE: &str = "x86_64-unknown-linux-gnu";

/// How a target's code is made: the target machine and the optimisation pipeline.
pub struct Machine {
    machine: TargetMachine,
    pipeline: &'static str,
    description: String,
}

impl Machine {
    pub fn new(target: Target, opt: OptLevel) -> Result<Machine, CodegenError> {
        LlvmTarget::initialize_x86(&InitializationConfig::default());
        let triple = TargetTriple::create(TRIPLE);
        let llvm_target = LlvmTarget::from_triple(&triple).map_err(|e| CodegenError::Llvm(e.to_string()))?;
        let CodeCpu { name: cpu, features } = code_cpu(target);
        // the oracle's scalar code is compiled quickly; the cpu target's as its level says
        let spec = target.spec();
        let (level, pipeline) = match (spec.this_cpu && spec.opt_levels, opt) {
            (false, _) => (OptimizationLevel::Less, "default<O1>"),
            (true, OptLevel::O0) => (OptimizationLevel::None, "default<O0>"),
            (true, OptLevel::O1) => (OptimizationLevel::Less, "default<O1>"),
            (true, OptLevel::O2) => (OptimizationLevel::Aggressive, "default<O3>"),
        };
        let machine = llvm_target
            .create_target_machine(&triple, &cpu, &features, level, RelocMode::PIC, CodeModel::Default)
            .ok_or_else(|| CodegenError::Llvm(format!("no target machine for {TRIPLE} ({cpu})")))?;
        let (major, minor, patch) = inkwell::support::get_llvm_version();
        let description = format!(
            "target {target}; LLVM {major}.{minor}.{patch}; {TRIPLE}; cpu {cpu}; features {features}; \
             codegen {level:?}; passes {pipeline}; PIC; default code model"
        );
        Ok(Machine {
            machine,
            pipeline,
            description,
        })
    }

    /// Everything besides the IR that the object code depends on (part of the cache key).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Compiles LLVM IR text whose kernels take one pointer per argument (`symbols` gives each
    /// kernel's name and argument count) into an object file's bytes.
    pub fn compile_object(&self, ir: &str, symbols: &[(&str, usize)]) -> Result<Vec<u8>, CodegenError> {
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "kernels");
        let module = context
            .create_module_from_ir(buffer)
            .map_err(|e| CodegenError::Llvm(e.to_string()))?;
        add_entries(&context, &module, symbols)?;
        module.set_triple(&self.machine.get_triple());
        module.set_data_layout(&self.machine.get_target_data().get_data_layout());
        module.verify().map_err(|e| CodegenError::Llvm(e.to_string()))?;
        module
            .run_passes(self.pipeline, &self.machine, PassBuilderOptions::create())
            .map_err(|e| CodegenError::Llvm(e.to_string()))?;
        let object = self
            .machine
            .write_to_memory_buffer(&module, FileType::Object)
            .map_err(|e| CodegenError::Llvm(e.to_string()))?;
        Ok(object.as_slice().to_vec())
    }
}

/// For each kernel `k(ptr, ..., ptr, i64 lo, i64 hi)` adds `k_entry(ptr args, i64 lo, i64 hi)`
/// calling `k(args[0], ..., lo, hi)`, and makes the kernel itself internal so that only the
/// entries are exported.
fn add_entries<'c>(context: &'c Context, module: &Module<'c>, symbols: &[(&str, usize)]) -> Result<(), CodegenError> {
    let ptr = context.ptr_type(AddressSpace::default());
    let i64t = context.i64_type();
    let entry_type = context
        .void_type()
        .fn_type(&[ptr.into(), i64t.into(), i64t.into()], false);
    let builder = context.create_builder();
    let err = |e: inkwell::builder::BuilderError| CodegenError::Llvm(e.to_string());
    for &(symbol, arity) in symbols {
        let kernel = module
            .get_function(symbol)
            .ok_or_else(|| CodegenError::Llvm(format!("kernel `{symbol}` is missing from the LLVM module")))?;
        if kernel.count_params() as usize != arity + 2 {
            return Err(CodegenError::Llvm(format!(
                "kernel `{symbol}` takes {} arguments, the plan passes {arity} pointers and a range",
                kernel.count_params()
            )));
        }
        kernel.set_linkage(Linkage::Internal);
        let entry = module.add_function(&llvm_entry_name(symbol), entry_type, None);
        builder.position_at_end(context.append_basic_block(entry, "entry"));
        let param = |i| entry.get_nth_param(i).expect("entry has three parameters");
        let args = param(0).into_pointer_value();
        let mut loaded = Vec::with_capacity(arity + 2);
        for i in 0..arity {
            // SAFETY: the runtime passes an array of `arity` pointers; index i is in bounds.
            let slot =
                unsafe { builder.build_gep(ptr, args, &[i64t.const_int(i as u64, false)], "slot") }.map_err(err)?;
            loaded.push(builder.build_load(ptr, slot, "arg").map_err(err)?.into());
        }
        loaded.push(param(1).into());
        loaded.push(param(2).into());
        builder.build_call(kernel, &loaded, "").map_err(err)?;
        builder.build_return(None).map_err(err)?;
    }
    Ok(())
}
