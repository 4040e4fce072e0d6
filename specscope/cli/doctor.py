"""``specscope doctor``: checks of nsys, its importer, the GPU and package versions."""

from __future__ import annotations

import click

from specscope.cli import Command


@click.command(cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--nsys", "nsys_path", default=None, metavar="PATH", help="nsys to check.")
@click.option("--no-probe", is_flag=True, help="Skip the tiny profile-and-export check.")
def doctor(nsys_path: str | None, no_probe: bool) -> None:
    """Check nsys, its importer, a real NVTX profile+export, the GPU and package versions.

    Prints one line per check with the fix for each failing one; exits 1 if any check failed.

    Example: specscope doctor --nsys /opt/nvidia/nsight-systems/2025.3.1/bin/nsys
    """
    from specscope.profiler.doctor import FAIL, run_checks

    checks = run_checks(nsys_path, probe=not no_probe)
    for check in checks:
        click.echo(check.line())
    if any(c.status == FAIL for c in checks):
        raise click.exceptions.Exit(1)


COMMANDS = (doctor,)
