import type { FastifyInstance } from 'fastify';

/**
 * What every answer says about itself, whatever route, error or 404 produced it. A route that
 * sets its own Content-Security-Policy or Cache-Control (the review page, the docs' static files)
 * keeps it; everything else gets the strict defaults below.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  // Answers are JSON or problem+json: a browser must never sniff one into HTML or script.
  'x-content-type-options': 'nosniff',
  // URLs carry operation refs and run ids; they must not leak to another origin as a Referer.
  'referrer-policy': 'no-referrer',
  // Audit data is not to be framed by another page (clickjacking); CSP frame-ancestors says the
  // same to browsers that read it, this to those that do not.
  'x-frame-options': 'DENY',
  // Another origin may not embed an answer as a script or an image (no-cors reads, XS-Leaks).
  'cross-origin-resource-policy': 'same-origin',
};

/** A JSON answer is data: opened as a document, it may load nothing and be framed by nobody. */
export const API_CONTENT_SECURITY_POLICY =
  "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * An HTML page that did not set its own policy (the API docs): its scripts and styles from this
 * origin only, no inline script; Swagger UI sets style attributes, hence the inline styles.
 */
export const PAGE_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function installSecurityHeaders(instance: FastifyInstance): void {
  instance.addHook('onSend', (_request, reply, payload, done) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
    if (!reply.hasHeader('content-security-policy')) {
      const type = String(reply.getHeader('content-type') ?? '');
      reply.header(
        'content-security-policy',
        type.startsWith('text/html') ? PAGE_CONTENT_SECURITY_POLICY : API_CONTENT_SECURITY_POLICY,
      );
    }
    // Answers describe one tenant's operations at one moment: no shared cache (a proxy, the
    // browser's disk) may keep them. Static assets that set their own policy keep it.
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    // Nothing here sets it; removed in case a plugin ever does, so the stack is not advertised.
    reply.removeHeader('x-powered-by');
    done(null, payload);
  });
}
