import { Injectable } from '@nestjs/common';
import { Repository } from '@aileron/database';

export interface SigningKeyRecord {
  id: string;
  publicKey: string;
  /** sealed by the root key (or a PEM from before sealing existed) */
  privateKey: string;
  createdAt: Date;
  retiredAt: Date | null;
}

/** Installation-wide signing keys by purpose; newest first. */
@Injectable()
export class SigningKeysRepository extends Repository {
  list(purpose: string): Promise<SigningKeyRecord[]> {
    return this.client.signingKey.findMany({
      where: { purpose },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      select: { id: true, publicKey: true, privateKey: true, createdAt: true, retiredAt: true },
    });
  }

  async create(purpose: string, data: { id: string; publicKey: string; privateKey: string }): Promise<void> {
    await this.client.signingKey.create({ data: { purpose, ...data } });
  }

  async retireAllBut(purpose: string, keep: string[], at: Date): Promise<void> {
    await this.client.signingKey.updateMany({
      where: { purpose, id: { notIn: keep }, retiredAt: null },
      data: { retiredAt: at },
    });
  }

  /** Re-seals private keys under the current root key (root rotation). */
  async replacePrivateKey(id: string, privateKey: string): Promise<void> {
    await this.client.signingKey.update({ where: { id }, data: { privateKey } });
  }

  async all(): Promise<(SigningKeyRecord & { purpose: string })[]> {
    return this.client.signingKey.findMany({
      select: { id: true, purpose: true, publicKey: true, privateKey: true, createdAt: true, retiredAt: true },
    });
  }
}
