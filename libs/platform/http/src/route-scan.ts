import { MODULE_METADATA } from '@nestjs/common/constants';
import { ROUTE_METADATA, RouteDefinition } from './route.decorator';

type ModuleRef = object | { module: object; imports?: unknown[]; controllers?: unknown[] };

function metadataList(target: object, key: string): unknown[] {
  return (Reflect.getMetadata(key, target) as unknown[] | undefined) ?? [];
}

/**
 * Every @Route of the controllers the modules (and the modules they import)
 * declare, read from the decorators alone: nothing is instantiated, so the
 * build can write the OpenAPI document without a database or a running
 * server. Sorted as RouteCatalog sorts, so both make the same document.
 */
export function routesDeclaredIn(modules: readonly ModuleRef[]): RouteDefinition[] {
  const seenModules = new Set<object>();
  const controllers = new Set<object>();
  const visit = (entry: unknown): void => {
    if (!entry || (typeof entry !== 'object' && typeof entry !== 'function')) return;
    // a dynamic module is a plain object naming its class; its own lists add to the class's
    const dynamic =
      'module' in entry ? (entry as { module: object; imports?: unknown[]; controllers?: unknown[] }) : null;
    const type = dynamic ? dynamic.module : entry;
    const key = dynamic ?? type;
    if (seenModules.has(key)) return;
    seenModules.add(key);
    for (const controller of [...metadataList(type, MODULE_METADATA.CONTROLLERS), ...(dynamic?.controllers ?? [])])
      controllers.add(controller as object);
    for (const imported of [...metadataList(type, MODULE_METADATA.IMPORTS), ...(dynamic?.imports ?? [])])
      visit(imported);
  };
  modules.forEach(visit);
  const routes: RouteDefinition[] = [];
  for (const controller of controllers) {
    const handlers = new Map<string, unknown>();
    // inherited handlers count, as Nest's MetadataScanner counts them
    for (
      let prototype = (controller as { prototype: object }).prototype;
      prototype && prototype !== Object.prototype;
      prototype = Object.getPrototypeOf(prototype) as object
    ) {
      for (const name of Object.getOwnPropertyNames(prototype))
        if (name !== 'constructor' && !handlers.has(name))
          handlers.set(name, Object.getOwnPropertyDescriptor(prototype, name)?.value);
    }
    for (const handler of handlers.values()) {
      if (typeof handler !== 'function') continue;
      const route = Reflect.getMetadata(ROUTE_METADATA, handler) as RouteDefinition | undefined;
      if (route) routes.push(route);
    }
  }
  return routes.sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
}
