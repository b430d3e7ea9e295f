"""A kernel module written to a file and imported (a kernel's source is read from its
file: a test that builds one from text writes it first)."""
import importlib.util


def kernel_module(tmp_path, name: str, source: str):
    """The module ``name`` made of ``source`` in ``tmp_path``, imported."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
