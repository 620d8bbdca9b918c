"""Engines: where the heavy, data-parallel steps of the disclosure classes run (``local``
in this process with bounded memory, ``spark`` on a Spark cluster). Everything after the
per-user counts (statistics, checks, evidence) runs in the gate's process."""
