import click

COMMANDS: list[click.Command] = []
