/**
 * Real-looking credentials (not real ones): [what, the text sent, a fragment that must not survive].
 * One corpus for the redaction unit test and the secrets E2E, so both check the same kinds.
 */
export const SECRET_CORPUS: Array<[string, string, string]> = [
  ['bearer token', 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0', '9f8e7d6c5b4a3928'],
  ['stripe live key', 'used key sk_live_51HqLyjWDarjtT1zdp7dcXLnm', 'sk_live_51HqLyj'],
  ['stripe test key', 'pk_test_TYooMQauvdEDq54NiTphI7jx', 'TYooMQauvdEDq54'],
  ['openai style key', 'key=sk-proj-abcDEF1234567890ghijKLMN', 'abcDEF1234567890'],
  ['jwt', 'token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U', 'dozjgNryP4J3'],
  ['bare jwt', 'cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk', 'eyJzdWIiOiIxIn0'],
  ['pem private key', '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v\n-----END RSA PRIVATE KEY-----', 'MIIEowIBAAKCAQEA7v'],
  ['aws access key', 'AKIAIOSFODNN7EXAMPLE was used', 'AKIAIOSFODNN7EXAMPLE'],
  ['github token', 'ghp_16C7e42F292c6912E7710c838347Ae178B4a', 'ghp_16C7e42F292c'],
  ['slack token', 'xoxb-123456789012-abcdefghijkl', 'xoxb-1234567'],
  ['password assignment', 'password=hunter2hunter2', 'hunter2hunter2'],
  ['url credentials', 'postgres://admin:s3cr3tpass@db.internal/prod', 's3cr3tpass'],
  ['visa card', 'charged 4111 1111 1111 1111 ok', '4111 1111 1111 1111'],
  ['amex card', 'card 378282246310005', '378282246310005'],
  ['dashed card', '5555-5555-5555-4444', '5555-5555-5555-4444'],
];
