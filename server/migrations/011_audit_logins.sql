-- Whether a teacher has ever signed in (teaching/classes.py: a teacher who
-- has used the default class keeps it on joining another) is read from the
-- audit log's logins: by name, without reading the whole log.
CREATE INDEX audit_log_logins ON audit_log (actor) WHERE action = 'login';
