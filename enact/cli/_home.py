"""``enact home export|verify|import``: carry a home to another host as one
archive file (``enact.backup.archive``)."""

from __future__ import annotations

from pathlib import Path

import click

from enact.cli._client import NotRunning, expect, request
from enact.cli._options import EXIT_USAGE, end_on_failure, fail, home_option, print_json, resolve_home

NOT_PORTABLE = ("native runtime sessions (Codex, Claude Code) stay on the old host: the first turn of each "
                "conversation here starts a fresh session with the startup context")


@click.group("home")
def home() -> None:
    """Export a home to an archive, verify one, import one on another host."""


@home.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--move", is_flag=True, help="Also mark this home as moved: a daemon refuses to start on it "
                                           "afterwards (the daemon must be stopped first).")
@click.option("--include-secrets", is_flag=True, help="Keep the Telegram token file and credential-shaped "
                                                      "configuration lines (left out by default).")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print the archive's path and its backup's manifest.")
def export(file: Path, move: bool, include_secrets: bool, home: Path | None, as_json: bool) -> None:
    """Write the home to FILE (a tar file, gzip-compressed when it ends in .gz): a backup,
    taken through the running daemon when one runs, with its manifest and checksums."""
    from enact.backup.archive import Exported, export_stopped, pack, scratch_beside
    from enact.backup.manifest import BackupError, Manifest, read_manifest
    from enact.backup.snapshot import Backup, DaemonRunning
    from enact.messages.backup import Create, Created

    where = resolve_home(home)
    target = file.expanduser().absolute()
    try:
        if move:
            exported = export_stopped(where, target, include_secrets=include_secrets, move=True)
        else:
            with scratch_beside(target) as scratch:
                message = Create(to=str(scratch), include_secrets=include_secrets)
                try:
                    reply = request(where, message)
                except NotRunning:
                    exported = export_stopped(where, target, include_secrets=include_secrets, move=False)
                else:
                    end_on_failure(reply, as_json=as_json)
                    created = expect(reply, Created, message)
                    backup = Backup(Path(created.path), read_manifest(Path(created.path)))
                    exported = Exported(pack(backup, target), backup.manifest, None)
    except DaemonRunning:
        fail("stop the daemon first (enact daemon stop): a home is moved with no daemon running on it",
             as_json=as_json, code=EXIT_USAGE, status="refused")
    except (BackupError, OSError) as error:
        fail(str(error), as_json=as_json)
    manifest: Manifest = exported.manifest
    if as_json:
        print_json({"path": str(exported.path), "moved": exported.moved is not None, "manifest": manifest.to_json()})
        return
    click.echo(str(exported.path))
    if exported.moved is not None:
        click.echo(f"{where} is marked as moved: a daemon refuses to start on it (--force overrides, "
                   "without its Telegram channel)")


@home.command("verify")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def verify(file: Path, home: Path | None, as_json: bool) -> None:
    """Check FILE without importing it: its format, every file against the manifest's
    sha256, every record of its state decoded (an archive stands alone: the home is not read)."""
    from enact.backup.archive import verify_archive
    from enact.backup.manifest import BackupError

    try:
        verified = verify_archive(file.expanduser().absolute())
    except BackupError as error:
        fail(str(error), as_json=as_json)
    if as_json:
        print_json({"status": "ok", "path": str(file), "records": verified.records,
                    "files": len(verified.manifest.files), "generation": verified.manifest.generation,
                    "home_id": verified.manifest.home_id})
        return
    click.echo(f"{file}: ok ({len(verified.manifest.files)} files, {verified.records:,} records)")


@home.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def import_command(file: Path, home: Path | None, as_json: bool) -> None:
    """Verify FILE, then lay it down in the home, which must be empty: a new generation,
    a new home id, the memory index rebuilt at the first start."""
    from enact.backup.archive import HomeNotEmpty, import_home
    from enact.backup.manifest import BackupError

    where = resolve_home(home)
    try:
        imported = import_home(file.expanduser().absolute(), where)
    except HomeNotEmpty as error:
        fail(str(error), as_json=as_json, code=EXIT_USAGE, status="refused")
    except BackupError as error:
        fail(str(error), as_json=as_json)
    if as_json:
        print_json({"status": "imported", "home": str(where), "generation": imported.generation,
                    "home_id": imported.home_id, "native_sessions_dropped": imported.native_sessions_dropped,
                    "left_out": imported.manifest.left_out, "not_portable": NOT_PORTABLE})
        return
    click.echo(f"imported {file} into {where} at generation {imported.generation}, home id {imported.home_id}; "
               "start the daemon (enact daemon start) and the memory index is rebuilt")
    click.echo(f"{NOT_PORTABLE} ({imported.native_sessions_dropped} dropped)")
