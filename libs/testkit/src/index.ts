export { ContainerRedisNode, containerRuntimeAvailable, testRedisImage } from './container-redis-node.ts';
export { FaultProxy, type Fault } from './fault-proxy.ts';
export { freePort, LOOPBACK } from './free-port.ts';
export { ManagedProcess, type ManagedProcessOptions } from './managed-process.ts';
export { ProcessRedisNode } from './process-redis-node.ts';
export { reaper } from './reaper.ts';
export type { RedisDriver, RedisNode, RedisNodeOptions } from './redis-node.ts';
export { ClientLink, defaultDriver, RedisNodes, startRedisNodes, type StartRedisNodesOptions } from './redis-nodes.ts';
export { ping, sleep, waitUntil } from './wait.ts';
