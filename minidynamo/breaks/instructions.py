"""The instructions a frame can break at, and what each reads from the stack.

At a break the graph stops before one of these and the entry runs it eagerly (``entry.py``), then
calls a resume function for the rest (``resume_code.py``).  The tracer decides which stack values
the program itself sees there (``tracer/graph_break.py``) from the same operand counts.
"""

JUMPS = {   # opcode -> (jumps when the truth is, keeps the value on the stack when jumping)
    "POP_JUMP_FORWARD_IF_TRUE": (True, False), "POP_JUMP_BACKWARD_IF_TRUE": (True, False),
    "POP_JUMP_FORWARD_IF_FALSE": (False, False), "POP_JUMP_BACKWARD_IF_FALSE": (False, False),
    "JUMP_IF_TRUE_OR_POP": (True, True), "JUMP_IF_FALSE_OR_POP": (False, True),
}
UNARY = {"UNARY_NEGATIVE": "-", "UNARY_POSITIVE": "+", "UNARY_INVERT": "~", "UNARY_NOT": "not "}
BREAKABLE = {"CALL", "CALL_FUNCTION_EX", "FORMAT_VALUE", "BINARY_SUBSCR", "STORE_SUBSCR", "DELETE_SUBSCR",
             "STORE_ATTR", "DELETE_ATTR", "LOAD_ATTR", "LOAD_METHOD", "BINARY_OP", "COMPARE_OP",
             "CONTAINS_OP", *UNARY, "BEFORE_WITH", *JUMPS}


def eager_operands(name: str, arg: int) -> int:
    """How many values from the top of the stack a breakable instruction reads: CALL's NULL or
    callable, callable or self, and arguments; CALL_FUNCTION_EX's NULL, callable, arguments and
    keywords when flagged; FORMAT_VALUE's value and spec when flagged; a subscript's container and
    key; a subscript store's value, container and key, a subscript delete's container and key;
    an attribute store's value and object, an attribute read's or delete's object; a binary
    operator's, a comparison's and ``in``'s two operands, a unary operator's one; a with
    statement's context manager; a jump's condition."""
    if name == "CALL":
        return arg + 2
    if name == "CALL_FUNCTION_EX":
        return 4 if arg & 1 else 3
    if name == "FORMAT_VALUE":
        return 2 if arg & 0x04 else 1
    if name in ("BINARY_SUBSCR", "BINARY_OP", "COMPARE_OP", "CONTAINS_OP", "STORE_ATTR", "DELETE_SUBSCR"):
        return 2
    if name in ("DELETE_ATTR", "LOAD_ATTR", "LOAD_METHOD") or name in UNARY:
        return 1
    if name == "STORE_SUBSCR":
        return 3
    return 1 if name in JUMPS or name == "BEFORE_WITH" else 0
