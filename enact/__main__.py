from enact.cli import main

main(prog_name="enact")
