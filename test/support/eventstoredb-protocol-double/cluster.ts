/**
 * A cluster of EventStoreDB PROTOCOL DOUBLES: several in-process nodes on loopback sharing one
 * in-memory log, each answering Gossip with every member's state. It models what a client of a
 * cluster sees, not how a cluster works: no replication protocol, no quorum, no real election.
 *   - one leader, the other nodes followers; `electLeader(i)` moves the leadership (a failover);
 *   - `startElection()`: no leader, every node answers "Server Is Not Ready" and gossip shows no
 *     usable member, so a client's discovery fails ("Failed to discover after N attempts.");
 *   - `pauseReplication()`: followers stop seeing new events until `resumeReplication()`, so a
 *     read served by a follower is stale.
 */
import { InMemoryLog } from './in-memory-log';
import {
  EventStoreDbProtocolDouble,
  type ClusterView,
  type NodeRole,
  type ProtocolDoubleOptions,
} from './protocol-double';

export interface ProtocolClusterOptions extends Omit<ProtocolDoubleOptions, 'port' | 'log' | 'cluster'> {
  size?: number;
}

export class EventStoreDbProtocolCluster implements ClusterView {
  readonly log: InMemoryLog;
  readonly nodes: EventStoreDbProtocolDouble[] = [];
  private leaderIndex: number | undefined = 0;
  private replicationPausedAt: bigint | undefined;

  private constructor(initialPosition?: bigint) {
    this.log = new InMemoryLog(initialPosition);
  }

  static async start(options: ProtocolClusterOptions = {}): Promise<EventStoreDbProtocolCluster> {
    const { size = 3, ...nodeOptions } = options;
    const cluster = new EventStoreDbProtocolCluster(options.initialPosition);
    for (let index = 0; index < size; index++) {
      cluster.nodes.push(await EventStoreDbProtocolDouble.start({ ...nodeOptions, log: cluster.log, cluster }));
    }
    // As on a single double, the log never starts empty.
    cluster.nodes[0].appendSystemEvent('$settings', '$settings');
    cluster.nodes[0].appendSystemEvent('$stats-127.0.0.1:2113', '$statsCollected');
    return cluster;
  }

  /**
   * Every node as a gossip seed, as docker-compose.yml's cluster connection string lists them.
   * Discovery is shortened (3 attempts, 20 ms apart) so a failing discovery ends within a test.
   */
  get connectionString(): string {
    const hosts = this.nodes.map((node) => `127.0.0.1:${node.port}`).join(',');
    return `esdb://${hosts}?tls=false&maxDiscoverAttempts=3&discoveryInterval=20&gossipTimeout=1`;
  }

  /** One node alone, as a client that was left connected to it sees the cluster. */
  connectionStringOf(node: EventStoreDbProtocolDouble): string {
    return node.connectionString;
  }

  roleOf(node: EventStoreDbProtocolDouble): NodeRole {
    if (this.leaderIndex === undefined) return 'electing';
    return this.nodes[this.leaderIndex] === node ? 'leader' : 'follower';
  }

  leader(): EventStoreDbProtocolDouble | undefined {
    return this.leaderIndex === undefined ? undefined : this.nodes[this.leaderIndex];
  }

  followers(): EventStoreDbProtocolDouble[] {
    return this.nodes.filter((node) => this.roleOf(node) === 'follower');
  }

  members(): EventStoreDbProtocolDouble[] {
    return this.nodes;
  }

  replicatedUpTo(): bigint | undefined {
    return this.replicationPausedAt;
  }

  electLeader(index: number): void {
    this.leaderIndex = index;
  }

  startElection(): void {
    this.leaderIndex = undefined;
  }

  pauseReplication(): void {
    const events = this.log.events;
    this.replicationPausedAt = events.length > 0 ? events[events.length - 1].position : -1n;
  }

  resumeReplication(): void {
    this.replicationPausedAt = undefined;
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop()));
  }
}
