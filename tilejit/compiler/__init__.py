"""The compiler: ``pipeline.compile_kernel`` turns one kernel source and one
specialization into a ``CompiledKernel`` (``artifact.py``), running the front end, the
source passes and code generation in order; ``dump.py`` writes every stage when asked.
May import every layer below it (frontend, passes, codegen, ir, language); never the
runtime, the simulator or the doors.
"""
