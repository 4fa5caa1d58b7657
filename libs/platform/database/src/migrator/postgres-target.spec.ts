import { describe, expect, it } from 'vitest';
import { postgresTarget } from './postgres-target';

describe('postgresTarget', () => {
  it('reads every part of the URL into discrete fields, never a connection string', () => {
    const target = postgresTarget(
      'postgresql://us%40er:p%40ss%2Fw@db.example:6543/my%20db?schema=tenant_a&application_name=cp',
    );
    expect(target.config).toEqual({
      host: 'db.example',
      port: 6543,
      user: 'us@er',
      password: 'p@ss/w',
      database: 'my db',
      application_name: 'cp',
      options: '-c search_path="tenant_a"',
    });
    expect(target.schemaName).toBe('tenant_a');
    expect(target.display).toBe('postgresql://us%40er:***@db.example:6543/my%20db?schema=tenant_a&application_name=cp');
    expect(target.secrets).toContain('p@ss/w');
  });

  it('defaults what the URL leaves out, and takes a socket directory from ?host=', () => {
    const target = postgresTarget('postgres:///aileron?host=/var/run/postgresql');
    expect(target.config).toEqual({
      host: '/var/run/postgresql',
      port: 5432,
      database: 'aileron',
      application_name: 'aileron-migrator',
    });
    expect(target.schemaName).toBe('public');
    expect(target.secrets).toEqual([]);
  });

  it('reads sslmode as node-postgres does for the control plane', () => {
    expect(postgresTarget('postgres://db/x?sslmode=disable').config.ssl).toBe(false);
    expect(postgresTarget('postgres://db/x?sslmode=no-verify').config.ssl).toEqual({ rejectUnauthorized: false });
    expect(postgresTarget('postgres://db/x?sslmode=verify-full').config.ssl).toEqual({});
    expect(postgresTarget('postgres://db/x?sslmode=require&uselibpqcompat=true').config.ssl).toEqual({
      rejectUnauthorized: false,
    });
  });

  it('refuses what is not a PostgreSQL URL without echoing it', () => {
    expect(() => postgresTarget('mysql://u:hunter2@db/x')).toThrow(
      'Invalid PostgreSQL URL: protocol mysql: (expected postgres: or postgresql:).',
    );
    expect(() => postgresTarget('postgres://u:hunter2@bad host/x')).toThrow(/^Invalid PostgreSQL URL \(expected/);
    const unreadable = (() => {
      try {
        postgresTarget('postgres://u:hunter2@db/x?sslrootcert=/nonexistent/hunter2.pem');
      } catch (error) {
        return (error as Error).message;
      }
    })();
    expect(unreadable).toMatch(/^Invalid PostgreSQL URL: ENOENT/);
    expect(unreadable).not.toContain('hunter2');
  });
});
