"""OIDC_ISSUERS, read in-process: a school's issuers parse into what the
sign-in needs, and a wrong one stops start-up with one sentence that names
what is wrong and never shows a client secret."""
import json

import pytest

from server import config
from server.signin.issuers import parse
from server.signin.service import destination

GOOGLE = {"name": "Google", "issuer": "https://accounts.google.com", "client_id": "123.apps",
          "client_secret": "very-secret-value", "policy": "existing", "domains": ["School.org"]}


def refusal(value):
    with pytest.raises(config.ConfigError) as refused:
        config.load({"OIDC_ISSUERS": json.dumps(value) if not isinstance(value, str) else value})
    said = str(refused.value)
    assert "very-secret-value" not in said and "\n" not in said
    return said


def test_several_issuers_parse_with_their_policies_domains_and_group_roles():
    entra = {"name": "Microsoft 365", "issuer": "https://login.microsoftonline.com/tenant-id/v2.0/",
             "client_id": "app-id", "client_secret": "s", "policy": "create_students",
             "domains": ["students.school.org", "school.org"], "group_claim": "roles",
             "groups": {"Teachers": "teacher"}, "verified_claim": "xms_edov"}
    google, microsoft = config.load({"OIDC_ISSUERS": json.dumps([GOOGLE, entra])}).OIDC_ISSUERS
    assert (google.id, google.url, google.domains, google.policy) == (
        "google", "https://accounts.google.com", ("school.org",), "existing")
    assert (microsoft.id, microsoft.url, microsoft.group_claim, microsoft.groups) == (
        "microsoft-365", "https://login.microsoftonline.com/tenant-id/v2.0", "roles", (("Teachers", "teacher"),))
    assert (google.verified_claim, microsoft.verified_claim) == ("email_verified", "xms_edov")
    assert google.allows("ada@SCHOOL.org") and not google.allows("ada@school.org.evil.test")
    assert not google.allows("ada@students.school.org") and microsoft.allows("ada@students.school.org")
    assert "very-secret-value" not in repr(google)
    assert config.load({}).OIDC_ISSUERS == ()


@pytest.mark.parametrize("change, said", [
    ({"policy": "everyone"}, "expected \"policy\" to be one of existing, create_students"),
    ({"domains": []}, "expected \"domains\" as a list of the school's e-mail domains"),
    ({"domains": ["*"]}, "expected \"domains\" as a list"),
    ({"issuer": "http://accounts.example.org"}, "expected \"issuer\" as the issuer's https:// address"),
    ({"client_secret": ""}, "expected \"client_secret\" as text"),
    ({"groups": {"staff": "root"}}, "expected \"groups\" as an object of group -> student|teacher|admin"),
    ({"scopes": "all"}, "unknown field 'scopes'"),
])
def test_a_wrong_issuer_is_refused_naming_what_is_wrong(change, said):
    assert said in refusal([{**GOOGLE, **change}])


def test_not_json_and_twice_the_same_name_are_refused():
    assert "expected a JSON list of issuers" in refusal("[{")
    assert "('google' is named twice)" in refusal([GOOGLE, {**GOOGLE, "name": "google"}])
    assert "OIDC_ISSUERS='********' is not valid" in refusal([{**GOOGLE, "policy": "x"}])


def test_http_is_allowed_only_for_a_provider_on_this_computer():
    assert parse(json.dumps([{**GOOGLE, "issuer": "http://127.0.0.1:9998/"}]))[0].url == "http://127.0.0.1:9998"


@pytest.mark.parametrize("next_page, role, lands", [
    ("/teacher", "teacher", "/teacher"), ("/admin", "teacher", "/teacher"), ("", "student", "/ide"),
    ("https://evil.test/", "admin", "/admin"), ("//evil.test", "student", "/ide"), ("/\\evil.test", "student", "/ide"),
])
def test_the_page_after_signing_in_is_one_of_the_users_own(next_page, role, lands):
    assert destination(next_page, role) == lands
