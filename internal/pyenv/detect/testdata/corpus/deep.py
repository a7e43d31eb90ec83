import operator
value = ((((((((((((((((((((((((((((((1))))))))))))))))))))))))))))))
nested = [[[[[[[[[[[[[[[[[[[[operator.add(1, 2)]]]]]]]]]]]]]]]]]]]
chain = 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
def a():
    def b():
        def c():
            def d():
                def e():
                    import deeply_nested_import
                    return operator.mul(2, 3)
                return e
            return d
        return c
    return b
