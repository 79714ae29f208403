"""The reference for `slm-lab`'s start-up in bench/whole_process.py: a bare Typer CLI, one command."""

import typer

app = typer.Typer(add_completion=False)


@app.command()
def hello(name: str = "world") -> None:
    """Greet NAME."""
    typer.echo(f"hello {name}")


if __name__ == "__main__":
    app()
