-- Failed logins kept the name typed, also when it was no user's: often a
-- password typed into the name field, and shown on /audit. Such a name is
-- replaced by "unknown user"; a name that is a user's stays. The detail
-- was always `failed login as "<name>" from <address>` (the name quoted by
-- Go's %q, a user's name never needs escaping), and the address, the last
-- word, stays when it looks like one.
UPDATE audit
SET detail = 'failed login as unknown user' || CASE
        WHEN substr(detail, length(rtrim(detail, replace(detail, ' ', ''))) + 1) GLOB '*[^0-9A-Fa-f.:]*' THEN ''
        WHEN substr(detail, length(rtrim(detail, replace(detail, ' ', ''))) + 1) = '' THEN ''
        ELSE ' from ' || substr(detail, length(rtrim(detail, replace(detail, ' ', ''))) + 1)
    END
WHERE action = 'login_failed'
  AND detail NOT LIKE 'failed login as unknown user%'
  AND NOT EXISTS (
      SELECT 1 FROM users u
      WHERE substr(audit.detail, 1, length('failed login as "' || u.name || '" from ')) = 'failed login as "' || u.name || '" from ');
