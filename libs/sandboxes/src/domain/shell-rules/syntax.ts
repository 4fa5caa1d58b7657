import { forEachChild, type SyntaxNode } from 'unbash';

/** The first error bash would refuse in a parsed script, at any depth. */
export function firstError(node: SyntaxNode): { message: string; pos: number } | null {
  let found: { message: string; pos: number } | null = null;
  const visit = (child: SyntaxNode): void => {
    if (found) return;
    if (child.type === 'Script' && child.errors?.length) found = child.errors[0]!;
    else forEachChild(child, visit);
  };
  visit(node);
  return found;
}
