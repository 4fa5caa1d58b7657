import { Injectable } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { ROUTE_METADATA, RouteDefinition } from './route.decorator';

/** Every endpoint declared with @Route, for the OpenAPI document and the tenancy tests. */
@Injectable()
export class RouteCatalog {
  private cache: RouteDefinition[] | undefined;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
  ) {}

  all(): RouteDefinition[] {
    if (this.cache) return this.cache;
    const routes: RouteDefinition[] = [];
    for (const wrapper of this.discovery.getControllers()) {
      const instance = wrapper.instance as object | undefined;
      if (!instance) continue;
      const prototype = Object.getPrototypeOf(instance) as object;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const handler = (prototype as Record<string, unknown>)[name];
        if (typeof handler !== 'function') continue;
        const route = this.reflector.get<RouteDefinition | undefined>(ROUTE_METADATA, handler);
        if (route) routes.push(route);
      }
    }
    return (this.cache = routes.sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method)));
  }
}
