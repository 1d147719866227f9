import pytest

from cronjobs.db.config import mask_conninfo, resolve_database, scrub
from cronjobs.errors import ConfigurationError


def test_option_wins() -> None:
    env = {"CRONJOBS_DATABASE_URL": "postgresql:///a", "DATABASE_URL": "postgresql:///b"}
    target = resolve_database("postgresql:///opt", env)
    assert (target.conninfo, target.source) == ("postgresql:///opt", "--database-url")


def test_precedence_of_environment() -> None:
    env = {"CRONJOBS_DATABASE_URL": "postgresql:///a", "DATABASE_URL": "postgresql:///b",
           "PGHOST": "h"}
    assert resolve_database(None, env).conninfo == "postgresql:///a"
    del env["CRONJOBS_DATABASE_URL"]
    assert resolve_database(None, env).conninfo == "postgresql:///b"
    del env["DATABASE_URL"]
    assert resolve_database(None, env).conninfo == ""
    assert resolve_database(None, {"PGDATABASE": "x"}).source == "PG* environment variables"


def test_embedded_default_when_nothing_configured() -> None:
    target = resolve_database(None, {"PGUSER": "only-user-is-not-enough"})
    assert target.embedded
    assert target.display == "embedded PostgreSQL"


def test_blank_values_are_ignored() -> None:
    assert resolve_database("  ", {"DATABASE_URL": ""}).embedded


def test_invalid_url_is_a_configuration_error_without_the_password() -> None:
    with pytest.raises(ConfigurationError) as info:
        resolve_database("postgresql://u:s3cret@host:notaport/db?bogus_option=1", {})
    assert "s3cret" not in info.value.message
    assert "--database-url" in info.value.message


@pytest.mark.parametrize(
    ("conninfo", "shown"),
    [
        ("postgresql://alice:s3cret@db.example:5432/prod",
         "postgresql://alice:***@db.example:5432/prod"),
        ("postgresql://alice@db/prod", "postgresql://alice@db/prod"),
        ("host=db user=alice password=s3cret dbname=prod",
         "host=db user=alice password=*** dbname=prod"),
        ("postgresql://u:p%40ss@h/d?sslmode=require", "postgresql://u:***@h/d?sslmode=require"),
    ],
)
def test_mask_conninfo(conninfo: str, shown: str) -> None:
    assert mask_conninfo(conninfo) == shown


def test_scrub_free_text() -> None:
    text = "failed: postgresql://bob:hunter2@x/y and password='a b' and password=zz"
    cleaned = scrub(text)
    assert "hunter2" not in cleaned
    assert "a b" not in cleaned
    assert "zz" not in cleaned
