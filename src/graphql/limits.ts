import { GraphQLError, Kind, type ASTNode, type ValidationContext, type ASTVisitor, type FragmentDefinitionNode } from 'graphql';

/**
 * Rejects operations nested deeper than `max` selection levels, so one request cannot fan out
 * into an unbounded number of nested lookups. Page sizes are capped by each connection field.
 */
export function depthLimit(max: number) {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const def of context.getDocument().definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
    const depthOf = (node: ASTNode, seen: Set<string>): number => {
      if (node.kind === Kind.FIELD) {
        if (node.name.value.startsWith('__')) return 0;
        return node.selectionSet ? 1 + Math.max(0, ...node.selectionSet.selections.map((s) => depthOf(s, seen))) : 1;
      }
      if (node.kind === Kind.INLINE_FRAGMENT) return Math.max(0, ...node.selectionSet.selections.map((s) => depthOf(s, seen)));
      if (node.kind === Kind.FRAGMENT_SPREAD) {
        const frag = fragments.get(node.name.value);
        if (!frag || seen.has(frag.name.value)) return 0;
        return Math.max(0, ...frag.selectionSet.selections.map((s) => depthOf(s, new Set([...seen, frag.name.value]))));
      }
      return 0;
    };
    return {
      OperationDefinition(op) {
        const depth = Math.max(0, ...op.selectionSet.selections.map((s) => depthOf(s, new Set())));
        if (depth > max) context.reportError(new GraphQLError(`Query depth ${depth} exceeds the limit of ${max}`, { nodes: [op], extensions: { code: 'VALIDATION_ERROR' } }));
      },
    };
  };
}
