import { Injectable } from '@nestjs/common';
import { Repository } from '@aileron/database';

/** Installation-wide secrets by name (`system_secrets`), one row each, shared by every replica. */
@Injectable()
export class InstallationKeysRepository extends Repository {
  /** The stored value: the first replica's wins when several make one at once. */
  async getOrCreate(name: string, make: () => string): Promise<string> {
    await this.client
      .$executeRaw`INSERT INTO system_secrets (name, value) VALUES (${name}, ${make()}) ON CONFLICT (name) DO NOTHING`;
    const row = await this.client.systemSecret.findUniqueOrThrow({ where: { name } });
    return row.value;
  }

  async all(): Promise<{ name: string; value: string }[]> {
    return this.client.systemSecret.findMany({ select: { name: true, value: true } });
  }

  /** Compare-and-set: a replica that read an older value does not overwrite what another wrote since. */
  async replace(name: string, expected: string, value: string): Promise<boolean> {
    const { count } = await this.client.systemSecret.updateMany({ where: { name, value: expected }, data: { value } });
    return count > 0;
  }
}
