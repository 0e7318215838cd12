import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule, type AppOptions } from './app.module';

/** Builds the application (used by main and by the tests, so both run the same wiring). */
export async function createApp(options: AppOptions): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({
    bodyLimit: options.config.bodyLimitBytes,
    // Prototype pollution through JSON keys is refused at the parser, before any code sees the body.
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: true,
    forceCloseConnections: false,
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.register(options), adapter, {
    logger: ['error', 'warn', 'log'],
    abortOnError: false,
  });
  app.enableShutdownHooks();
  return app;
}
