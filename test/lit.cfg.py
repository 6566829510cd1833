# lit configuration for dc's regression tests.
import os

import lit.formats

config.name = "dc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unittests", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dc_obj_root, "test")

# The tests are meant to run dc's invariant checks (DC_ASSERT): a build
# without them passes tests it should fail.
if not config.dc_enable_assertions:
    lit_config.fatal("dc's tests need a build with -DDC_ENABLE_ASSERTIONS=ON")

# dc's tools first, then LLVM's FileCheck, not, count, split-file. With
# --param runtime_tools_dir=DIR, DIR's tools come before dc's own: `build.sh
# sanitize` runs the runtime and dc-run tests with the sanitized dc-run and
# libdcrt of a runtime-only build (the sanitizers' options pass through).
tool_dirs = [config.dc_tools_dir, config.llvm_tools_dir]
runtime_tools_dir = lit_config.params.get("runtime_tools_dir")
if runtime_tools_dir:
    tool_dirs.insert(0, os.path.abspath(runtime_tools_dir))
config.environment["PATH"] = os.path.pathsep.join(
    tool_dirs + [config.environment.get("PATH", os.environ["PATH"])]
)
for name in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
config.substitutions.append(("%dc_src_root", config.dc_src_root))
config.substitutions.append(("%python", "python3"))
config.substitutions.append(("%dc_obj_root", config.dc_obj_root))
# Embed/: `cmake --install` this build, then configure a separate project
# against the prefix with the same CMake, generator and compilers.
config.substitutions.append(("%cmake_configure", " ".join([
    '"%s"' % config.cmake, '-G "%s"' % config.cmake_generator,
    '-DCMAKE_MAKE_PROGRAM="%s"' % config.cmake_make_program,
    '-DCMAKE_C_COMPILER="%s"' % config.c_compiler,
    '-DCMAKE_CXX_COMPILER="%s"' % config.cxx_compiler,
    "-DCMAKE_BUILD_TYPE=Release"])))
config.substitutions.append(("%cmake", '"%s"' % config.cmake))
# The runtime an artifact links against, to load one in a test process.
config.substitutions.append(
    ("%libdcrt", os.path.join(config.dc_obj_root, "lib", "libdcrt.so")))

# dc-compile --target=h200 needs the CUDA toolkit found at configure time.
if getattr(config, "dc_gpu_codegen", False):
    config.available_features.add("gpu-codegen")

# Frontend/: dc_torch needs a python that imports torch. On Debian 12 that
# is the system python3 with python3-torch (build.sh installs it), which a
# pyenv or venv python3 earlier on PATH may hide: probe it first.
import shutil
import subprocess

def _torch_python():
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and os.path.exists(candidate) and subprocess.run(
                [candidate, "-c", "import torch"], capture_output=True).returncode == 0:
            return candidate
    return None

torch_python = _torch_python()
if torch_python:
    config.available_features.add("torch")
    config.substitutions.append(("%{torch_python}", "env PYTHONPATH=%s:%s %s" % (
        os.path.join(config.dc_src_root, "python"),
        os.path.join(config.dc_src_root, "test", "Frontend", "Inputs"),
        torch_python)))
