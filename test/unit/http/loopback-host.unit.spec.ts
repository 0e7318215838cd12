import { isLoopbackHost } from '../../../src/http/security/loopback-host';

/** Which Host values local mode answers (docs/security.md, "Local mode"). */
describe('isLoopbackHost', () => {
  it.each([
    'localhost',
    'localhost:3000',
    'LOCALHOST',
    'localhost.',
    'console.localhost:8080',
    'a.b.localhost',
    '127.0.0.1',
    '127.0.0.1:65535',
    '127.255.255.254:1',
    '[::1]',
    '[::1]:3000',
  ])('answers %p', (host) => expect(isLoopbackHost(host)).toBe(true));

  it.each([
    undefined,
    '',
    'evil.example',
    'localhost.evil.example',
    'localhostx',
    'xlocalhost',
    '-bad.localhost',
    '127.0.0.1.evil.example',
    '127.0.0.256',
    '127.0.0',
    '128.0.0.1',
    '0.0.0.0',
    '[::2]',
    '[::ffff:127.0.0.1]',
    '::1',
    'localhost:',
    'localhost:65536',
    'localhost:80:80',
    'localhost:abc',
    'local host',
    ['localhost'],
  ])('refuses %p', (host) => expect(isLoopbackHost(host)).toBe(false));
});
