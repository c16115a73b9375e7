"""``enact backup create|list|verify|restore``: backups of a home
(``enact.backup``). ``create`` asks the running daemon, which copies off
its actors' threads; with no daemon, this process takes it, holding the
home's lock."""

from __future__ import annotations

import datetime
from pathlib import Path

import click
import orjson

from enact.cli._client import NotRunning, expect, request
from enact.cli._options import EXIT_USAGE, end_on_failure, fail, home_option, needs_daemon, print_json, resolve_home


@click.group("backup")
def backup() -> None:
    """Back up a home, list, verify and restore its backups."""


@backup.command("create")
@click.option("--to", "to", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write it in DIR (default: backup.dir; only backup.dir is pruned to backup.keep).")
@click.option("--include-secrets", is_flag=True, help="Keep the Telegram token file and credential-shaped "
                                                      "configuration lines (left out by default).")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
@needs_daemon
def create(to: Path | None, include_secrets: bool, home: Path | None, as_json: bool) -> None:
    """Take a consistent backup of the home, running daemon or not; print its path."""
    from enact.backup.manifest import BackupError
    from enact.backup.snapshot import create_stopped
    from enact.messages.backup import Create, Created

    where = resolve_home(home)
    target = to.expanduser().absolute() if to is not None else None
    message = Create(to=str(target or ""), include_secrets=include_secrets)
    try:
        reply = request(where, message)
    except NotRunning:
        try:
            made = create_stopped(where, reason="cli", include_secrets=include_secrets, to=target)
        except BackupError as error:
            fail(str(error), as_json=as_json)
        path, manifest = str(made.path), made.manifest.to_json()
    else:
        end_on_failure(reply, as_json=as_json)
        created = expect(reply, Created, message)
        path, manifest = created.path, orjson.loads(created.manifest_json)
    if as_json:
        print_json({"path": path, **manifest})
        return
    click.echo(path)


@backup.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_backups(home: Path | None, as_json: bool) -> None:
    """The backups in backup.dir, oldest first."""
    from enact.backup.settings import BackupSettings
    from enact.backup.snapshot import backups_in, load_settings

    directory = load_settings(resolve_home(home)).typed(BackupSettings).directory
    found = backups_in(directory)
    if as_json:
        print_json([{"path": str(b.path), **b.manifest.to_json()} for b in found])
        return
    if not found:
        click.echo(f"no backups in {directory}")
    for item in found:
        size = sum(entry.size for entry in item.manifest.files.values())
        when = datetime.datetime.fromtimestamp(item.manifest.created_at).strftime("%Y-%m-%d %H:%M:%S")
        click.echo(f"{item.path}  {when}  {size / 1e6:,.1f} MB  generation {item.manifest.generation}  "
                   f"{item.manifest.reason}{'  with secrets' if item.manifest.include_secrets else ''}")


@backup.command("verify")
@click.argument("path", type=click.Path(path_type=Path))
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def verify(path: Path, home: Path | None, as_json: bool) -> None:
    """Check PATH's files against its manifest and decode every record of its state
    (a backup stands alone: the home is not read)."""
    from enact.backup.manifest import BackupError
    from enact.backup.verify import verify as verify_backup

    try:
        verified = verify_backup(path.expanduser().absolute())
    except BackupError as error:
        fail(str(error), as_json=as_json, status="bad")
    if as_json:
        print_json({"status": "ok", "path": str(path), "records": verified.records,
                    "files": len(verified.manifest.files)})
        return
    click.echo(f"{path}: ok ({len(verified.manifest.files)} files, {verified.records:,} records)")


@backup.command("restore")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--takeover", is_flag=True, help="Stop the running daemon (it is fenced) and restore.")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def restore(path: Path, takeover: bool, home: Path | None, as_json: bool) -> None:
    """Verify PATH, then put it in place of the home's state and files (kept aside)."""
    from enact.backup.manifest import BackupError
    from enact.backup.restore import restore as restore_backup
    from enact.backup.snapshot import DaemonRunning

    where = resolve_home(home)
    try:
        restored = restore_backup(where, path.expanduser().absolute(), takeover=takeover)
    except DaemonRunning as error:
        fail(str(error), as_json=as_json, code=EXIT_USAGE, status="running")
    except BackupError as error:
        fail(str(error), as_json=as_json, status="bad")
    if as_json:
        print_json({"status": "restored", "path": str(path), "generation": restored.generation,
                    "replaced": str(restored.replaced) if restored.replaced else None,
                    "took_over": restored.took_over, "left_out": restored.manifest.left_out})
        return
    aside = f"; the replaced state is in {restored.replaced}" if restored.replaced else ""
    click.echo(f"restored {path} into {where} at generation {restored.generation}{aside}; start the daemon "
               "(enact daemon start) and the memory index is rebuilt")
