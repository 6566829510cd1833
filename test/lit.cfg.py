# lit configuration for dc's regression tests.
import os

import lit.formats

config.name = "dc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unittests", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dc_obj_root, "test")

# dc's tools first, then LLVM's FileCheck, not, count, split-file.
config.environment["PATH"] = os.path.pathsep.join(
    [config.dc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])]
)
config.substitutions.append(("%dc_src_root", config.dc_src_root))
config.substitutions.append(("%python", "python3"))

# dc-compile --target=h200 needs the CUDA toolkit found at configure time.
if getattr(config, "dc_gpu_codegen", False):
    config.available_features.add("gpu-codegen")
