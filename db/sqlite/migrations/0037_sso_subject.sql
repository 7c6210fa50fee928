-- Single sign-on (DASHBOARD.md, "Who sees what"; broker.SSOLogin): a user
-- made by a login through an OpenID Connect provider is that provider's
-- person, whoever later holds the name there.
--
-- sso_subject: the provider's issuer URL and the person's subject there,
-- joined by a space ("https://idp.example 248289761001"), written when
-- the user is made and never changed; '' for a local user (every row
-- written before this migration), who logs in with a password. A single
-- sign-on user has no password. One user a subject: the partial unique
-- index, which is also how a login finds its user.
ALTER TABLE users ADD COLUMN sso_subject TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX users_sso_subject ON users (sso_subject) WHERE sso_subject <> '';
